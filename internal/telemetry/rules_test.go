package telemetry_test

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/openclaw/occ/internal/telemetry"
	"github.com/openclaw/occ/internal/testdb"
)

const rulesFile = "../../deploy/prometheus/occ-rules.yaml"

// scrapeLabels are the labels Prometheus adds to every scraped series:
// job and instance always, and through the chart's ServiceMonitor the
// installation's (installationLabels).
var scrapeLabels = map[string]bool{"job": true, "instance": true, "namespace": true, "app_kubernetes_io_instance": true}

// installationLabels tell one OCC installation's series from another's
// when one Prometheus scrapes several, all as job "occ": the Prometheus
// Operator's namespace label and app_kubernetes_io_instance, the Helm
// release, which the chart's ServiceMonitor copies from its Services
// (targetLabels; internal/chart's TestMetrics checks it). Every rule keeps
// them apart: each aggregation groups by both, and each match between two
// vectors matches on both.
var installationLabels = []string{"namespace", "app_kubernetes_io_instance"}

// exported is every metric family name the registry can export, with the
// _bucket, _sum and _count series of histograms, each with the names of
// its labels (le on _bucket): every instrument is touched once so that
// label vectors have a series to gather.
func exported(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := telemetry.NewMetrics()
	m.RegisterDB(testdb.SQLite(t).DB())
	m.RegisterQueueDepth(nil) // no-op: nil func
	m.GatewayOperation("get", "direct", "ok", time.Millisecond)
	m.WorkClaimed("k")
	m.WorkerLoops(4)
	m.LoopBusy(true)
	m.LeaseLost()
	m.WorkRetried("k", "error")
	m.WorkFinished("k", "succeeded")
	m.DeploymentFinished("fake", "succeeded", time.Second)
	m.DriverCall("fake", "EnsureNamespace", "ok", time.Millisecond)
	m.AuditWriteFailed("mutation")
	m.ReadyNotice("expedited")
	m.RegisterReadCache(func() (uint64, uint64, bool) { return 1, 1, true })
	names := map[string]map[string]bool{
		// queue depth is a custom collector read at scrape time.
		telemetry.MetricWorkerQueueDepth: {"state": true},
	}
	h := chain(m, nil)
	serveOnce(h)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		n := mf.GetName()
		labels := map[string]bool{}
		for _, metric := range mf.GetMetric() {
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		names[n] = labels
		if mf.GetType().String() == "HISTOGRAM" {
			bucket := maps.Clone(labels)
			bucket["le"] = true
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = bucket, labels, labels
		}
	}
	return names
}

// TestAlertRules checks deploy/prometheus/occ-rules.yaml as "promtool check
// rules" does (rulefmt.ParseFile validates the YAML, every expression and
// every template) and requires every metric its expressions select to be
// one OCC exports ("up" is Prometheus's own).
func TestAlertRules(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	have := exported(t)
	rules := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules++
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				switch n := n.(type) {
				case *parser.VectorSelector:
					if n.Name == "up" {
						return nil
					}
					labels, ok := have[n.Name]
					if !ok {
						t.Errorf("alert %s selects %s, which OCC does not export", r.Alert, n.Name)
						return nil
					}
					for _, m := range n.LabelMatchers {
						if m.Name != model.MetricNameLabel && !labels[m.Name] && !scrapeLabels[m.Name] {
							t.Errorf("alert %s matches label %s of %s, which has no such label", r.Alert, m.Name, n.Name)
						}
					}
				case *parser.BinaryExpr:
					// A match of two vectors on fewer labels would pair one
					// installation's series with another's (on() matches all).
					vm := n.VectorMatching
					if vm == nil || n.LHS.Type() != parser.ValueTypeVector || n.RHS.Type() != parser.ValueTypeVector {
						return nil
					}
					for _, l := range installationLabels {
						if vm.On != slices.Contains(vm.MatchingLabels, l) {
							t.Errorf("alert %s matches %s without the installation label %s (%s)", r.Alert, n.Op, l, n)
						}
					}
				case *parser.AggregateExpr:
					// Every label it groups by must be on every series it
					// aggregates, or the groups silently merge into one.
					if n.Without {
						return nil
					}
					// And it must keep installations apart.
					for _, l := range installationLabels {
						if !slices.Contains(n.Grouping, l) {
							t.Errorf("alert %s aggregates (%s) without grouping by the installation label %s", r.Alert, n, l)
						}
					}
					parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
						vs, ok := inner.(*parser.VectorSelector)
						if !ok || have[vs.Name] == nil {
							return nil
						}
						for _, g := range n.Grouping {
							if !have[vs.Name][g] && !scrapeLabels[g] {
								t.Errorf("alert %s groups %s by %s, which it does not have", r.Alert, vs.Name, g)
							}
						}
						return nil
					})
				}
				return nil
			})
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q needs an alert name, a severity label and a summary", r.Alert)
			}
		}
	}
	if rules < 10 {
		t.Errorf("%d rules; docs/operations.md describes more", rules)
	}
}

// TestOperationsDocNamesEveryMetric: docs/operations.md describes every
// OCC metric family and every alert in the rules file.
func TestOperationsDocNamesEveryMetric(t *testing.T) {
	doc := readFile(t, "../../docs/operations.md")
	for n := range exported(t) {
		if strings.HasPrefix(n, "occ_") && !strings.HasSuffix(n, "_bucket") && !strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") {
			if !strings.Contains(doc, "`"+n+"`") {
				t.Errorf("docs/operations.md does not describe %s", n)
			}
		}
	}
	groups, _ := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	for _, a := range slices.Compact(alerts) {
		if !strings.Contains(doc, "`"+a+"`") {
			t.Errorf("docs/operations.md does not describe alert %s", a)
		}
	}
}

package telemetry_test

import (
	"log/slog"
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

// exported is every metric family name the registry can export, with the
// _bucket, _sum and _count series of histograms: every instrument is
// touched once so that label vectors have a series to gather.
func exported(t *testing.T) map[string]bool {
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
	names := map[string]bool{
		// queue depth is a custom collector read at scrape time.
		telemetry.MetricWorkerQueueDepth: true,
	}
	h := chain(m, nil)
	serveOnce(h)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		if mf.GetType().String() == "HISTOGRAM" {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
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
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				if vs.Name != "up" && !have[vs.Name] {
					t.Errorf("alert %s selects %s, which OCC does not export", r.Alert, vs.Name)
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

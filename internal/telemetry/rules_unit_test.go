package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"gopkg.in/yaml.v3"
)

const rulesTestFile = "../../deploy/prometheus/occ-rules.test.yaml"

// rulesUnitTestFile is the part of promtool's rule unit test format
// (`promtool test rules`) that occ-rules.test.yaml uses; the YAML is
// decoded strictly, so a field this runner would ignore (promql_expr_test,
// external_labels, start_timestamp ...) fails the test instead.
type rulesUnitTestFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval"`
	Tests              []rulesTestCase `yaml:"tests"`
}

type rulesTestCase struct {
	Name        string `yaml:"name"`
	Interval    model.Duration
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	AlertRuleTests []struct {
		EvalTime  model.Duration `yaml:"eval_time"`
		Alertname string         `yaml:"alertname"`
		ExpAlerts []struct {
			ExpLabels      map[string]string `yaml:"exp_labels"`
			ExpAnnotations map[string]string `yaml:"exp_annotations"`
		} `yaml:"exp_alerts"`
	} `yaml:"alert_rule_test"`
}

// firingAlert is one firing alert as promtool compares it: its labels
// (the sample's without __name__, the rule's labels, alertname) and its
// expanded annotations.
type firingAlert struct {
	Labels      map[string]string
	Annotations map[string]string
}

// TestAlertRuleUnitTests runs deploy/prometheus/occ-rules.test.yaml, the
// rules' unit tests in promtool's format, with promtool's semantics: the
// input series parsed as promtool parses them (the PromQL parser's series
// notation, one sample every interval from time 0, none where omitted),
// every rule of the file evaluated with the PromQL engine every
// evaluation_interval from time 0, an alert firing once its expression
// has returned its label set at every evaluation for the rule's "for"
// (rules.AlertingRule's pending→firing), and at each eval_time the firing
// alerts of the named rule exactly the expected ones, labels and
// annotations (expanded with Prometheus's template package as the rule
// manager expands them). promtool's own runner (cmd/promtool, and the
// promqltest and rules packages it uses) would need modules OCC does not
// require (the Alertmanager client, the TSDB's), so the series are served
// from memory (seriesQueryable).
func TestAlertRuleUnitTests(t *testing.T) {
	b, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var f rulesUnitTestFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	if len(f.RuleFiles) != 1 || filepath.Join(filepath.Dir(rulesTestFile), f.RuleFiles[0]) != filepath.Clean(rulesFile) {
		t.Fatalf("%s tests rule_files %v, want [occ-rules.yaml]", rulesTestFile, f.RuleFiles)
	}
	evalInterval := time.Duration(f.EvaluationInterval)
	if evalInterval == 0 {
		evalInterval = time.Minute // promtool's default
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	rules := map[string]rulefmt.Rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules[r.Alert] = r
			}
		}
	}
	if len(f.Tests) == 0 {
		t.Fatalf("%s has no tests", rulesTestFile)
	}
	for _, tc := range f.Tests {
		t.Run(tc.Name, func(t *testing.T) {
			runRulesTestCase(t, tc, rules, evalInterval)
		})
	}
}

func runRulesTestCase(t *testing.T, tc rulesTestCase, rules map[string]rulefmt.Rule, evalInterval time.Duration) {
	interval := time.Duration(tc.Interval)
	if interval == 0 {
		interval = evalInterval // promtool's default for a test group
	}
	st := loadSeries(t, tc, interval)
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:               1_000_000,
		Timeout:                  time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return evalInterval.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
	})
	t.Cleanup(func() { engine.Close() })
	ctx := t.Context()
	query := func(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
		qry, err := engine.NewInstantQuery(ctx, st, nil, q, ts)
		if err != nil {
			return nil, err
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, res.Err
		}
		switch v := res.Value.(type) {
		case promql.Vector:
			return v, nil
		case promql.Scalar:
			return promql.Vector{promql.Sample{T: v.T, F: v.V}}, nil
		default:
			return nil, fmt.Errorf("rule result is a %s, not a vector", res.Value.Type())
		}
	}

	// want[evalTime][alertname] is what must fire then.
	want := map[time.Duration]map[string][]firingAlert{}
	var maxEval time.Duration
	for _, at := range tc.AlertRuleTests {
		et := time.Duration(at.EvalTime)
		if et%evalInterval != 0 {
			t.Fatalf("eval_time %s is not a multiple of the evaluation interval %s", at.EvalTime, evalInterval)
		}
		if _, ok := rules[at.Alertname]; !ok {
			t.Fatalf("alert_rule_test names %s, which %s does not define", at.Alertname, rulesFile)
		}
		if want[et] == nil {
			want[et] = map[string][]firingAlert{}
		}
		exp := want[et][at.Alertname]
		if exp == nil {
			exp = []firingAlert{} // listed with no exp_alerts: nothing may fire
		}
		for _, a := range at.ExpAlerts {
			l := maps.Clone(a.ExpLabels)
			if l == nil {
				l = map[string]string{}
			}
			l[model.AlertNameLabel] = at.Alertname
			an := a.ExpAnnotations
			if an == nil {
				an = map[string]string{}
			}
			exp = append(exp, firingAlert{Labels: l, Annotations: an})
		}
		want[et][at.Alertname] = exp
		maxEval = max(maxEval, et)
	}

	names := slices.Sorted(maps.Keys(rules))
	activeAt := map[string]map[string]time.Time{} // alertname → label set → first evaluation that returned it
	for ts := time.Duration(0); ts <= maxEval; ts += evalInterval {
		now := time.Unix(0, 0).UTC().Add(ts)
		firing := map[string][]firingAlert{}
		for _, name := range names {
			r := rules[name]
			vec, err := query(ctx, r.Expr, now)
			if err != nil {
				t.Fatalf("alert %s at %s: %v", name, ts, err)
			}
			seen := map[string]bool{}
			if activeAt[name] == nil {
				activeAt[name] = map[string]time.Time{}
			}
			for _, smpl := range vec {
				a := alertFor(ctx, r, smpl, now, query)
				key := fmt.Sprint(a.Labels)
				if seen[key] {
					t.Fatalf("alert %s at %s: two samples give the label set %s", name, ts, key)
				}
				seen[key] = true
				since, ok := activeAt[name][key]
				if !ok {
					since = now
					activeAt[name][key] = now
				}
				if now.Sub(since) >= time.Duration(r.For) {
					firing[name] = append(firing[name], a)
				}
			}
			for key := range activeAt[name] {
				if !seen[key] {
					delete(activeAt[name], key) // resolved: a new pending alert next time
				}
			}
		}
		for name, exp := range want[ts] {
			got := firing[name]
			if got == nil {
				got = []firingAlert{}
			}
			sortAlerts(exp)
			sortAlerts(got)
			if diff := cmp.Diff(exp, got); diff != "" {
				t.Errorf("alert %s at eval_time %s (-want +got):\n%s", name, model.Duration(ts), diff)
			}
		}
	}
}

// alertFor is the alert an alerting rule's sample makes, as
// rules.AlertingRule.Eval makes it.
func alertFor(ctx context.Context, r rulefmt.Rule, smpl promql.Sample, now time.Time, query template.QueryFunc) firingAlert {
	l := smpl.Metric.Map()
	data := template.AlertTemplateData(l, nil, "", smpl)
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	expand := func(text string) string {
		out, err := template.NewTemplateExpander(ctx, defs+text, "__alert_"+r.Alert, data,
			model.TimeFromUnixNano(now.UnixNano()), query, nil, nil).Expand()
		if err != nil {
			return fmt.Sprintf("<error expanding template: %s>", err)
		}
		return out
	}
	labels := maps.Clone(l)
	delete(labels, model.MetricNameLabel)
	for k, v := range r.Labels {
		labels[k] = expand(v)
	}
	labels[model.AlertNameLabel] = r.Alert
	annotations := map[string]string{}
	for k, v := range r.Annotations {
		annotations[k] = expand(v)
	}
	return firingAlert{Labels: labels, Annotations: annotations}
}

func sortAlerts(as []firingAlert) {
	slices.SortFunc(as, func(a, b firingAlert) int { return strings.Compare(fmt.Sprint(a.Labels), fmt.Sprint(b.Labels)) })
}

// loadSeries parses the test case's input series as promtool's load
// command does and returns them as a Queryable.
func loadSeries(t *testing.T, tc rulesTestCase, interval time.Duration) storage.Queryable {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	var all []storage.Series
	for _, s := range tc.InputSeries {
		lset, vals, err := p.ParseSeriesDesc(s.Series + " " + s.Values)
		if err != nil {
			t.Fatalf("input series %s %s: %v", s.Series, s.Values, err)
		}
		var samples []chunks.Sample
		for i, v := range vals {
			if v.Omitted {
				continue
			}
			if v.Histogram != nil {
				t.Fatalf("input series %s: histogram samples are not supported here", s.Series)
			}
			samples = append(samples, floatSample{t: (time.Duration(i) * interval).Milliseconds(), f: v.Value})
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(sortSeries bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
			for _, s := range all {
				if matchesAll(s.Labels(), ms) {
					out = append(out, s)
				}
			}
			if sortSeries {
				slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			}
			return &seriesList{series: out}
		},
	}}
}

func matchesAll(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesList is a storage.SeriesSet of series in memory.
type seriesList struct {
	series []storage.Series
	i      int
}

func (s *seriesList) Next() bool                        { s.i++; return s.i <= len(s.series) }
func (s *seriesList) At() storage.Series                { return s.series[s.i-1] }
func (s *seriesList) Err() error                        { return nil }
func (s *seriesList) Warnings() annotations.Annotations { return nil }

// floatSample is a chunks.Sample of a float value.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

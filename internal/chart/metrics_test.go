package chart

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// path walks a decoded YAML value by map keys and list indexes; a missing
// step fails the test with the path so far.
func path(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for i, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", steps[:i], k)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("%v: no key %q", steps[:i], k)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", steps[:i], k)
			}
			v = l[k]
		}
	}
	return v
}

// portsByName are a container's or Service's ports, name to the
// "number/targetPort" the test compares.
func portsByName(t *testing.T, ports any) map[string]string {
	t.Helper()
	out := map[string]string{}
	list, _ := ports.([]any)
	for _, p := range list {
		m := p.(map[string]any)
		name, _ := m["name"].(string)
		switch {
		case m["containerPort"] != nil:
			out[name] = fmt.Sprint(m["containerPort"])
		default:
			out[name] = fmt.Sprintf("%v->%v", m["port"], m["targetPort"])
		}
	}
	return out
}

// TestMetrics checks that with metrics on, every piece agrees on one port:
// the listen address occ loads from the rendered configuration, the named
// container port of the API and the worker, the metrics Services that
// select those Pods, the NetworkPolicy rule that admits only the
// configured scrapers, and the ServiceMonitor that selects the metrics
// Services (and not the API's) with job "occ". With metrics off none of it
// is rendered. The port is also tried at the schema's limit, 65535.
func TestMetrics(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		sets       []string
		wantPort   int // 0: metrics off
		components []string
		monitor    bool
	}{
		{"off", "routing-off", nil, 0, []string{"api", "worker"}, false},
		{"postgres", "metrics", nil, 9464, []string{"api", "worker"}, true},
		{"sqlite: the API embeds the worker", "metrics", []string{"database.mode=sqlite", "metrics.serviceMonitor.enabled=false"}, 9464, []string{"api"}, false},
		{"highest port", "metrics", []string{"metrics.port=65535"}, 65535, []string{"api", "worker"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile(tt.file)}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			cfg, _ := occConfig(t, objs, release+"-occ-config")
			if tt.wantPort == 0 {
				if cfg.MetricsListen != "" {
					t.Errorf("metrics.listen = %q with metrics off", cfg.MetricsListen)
				}
			} else {
				_, port, err := net.SplitHostPort(cfg.MetricsListen)
				if err != nil || port != strconv.Itoa(tt.wantPort) {
					t.Errorf("metrics.listen = %q (%v), want port %d", cfg.MetricsListen, err, tt.wantPort)
				}
			}
			for _, c := range tt.components {
				name := release + "-occ-" + c
				d, ok := objs["Deployment/"+name]
				if !ok {
					t.Fatalf("no Deployment %s", name)
				}
				container := path(t, d.Spec, "template", "spec", "containers", 0).(map[string]any)
				got := portsByName(t, container["ports"])["metrics"]
				svc, hasSvc := objs["Service/"+name+"-metrics"]
				np := objs["NetworkPolicy/"+name]
				if tt.wantPort == 0 {
					if got != "" || hasSvc {
						t.Errorf("%s: metrics port %q, Service %v with metrics off", c, got, hasSvc)
					}
					continue
				}
				if want := strconv.Itoa(tt.wantPort); got != want {
					t.Errorf("%s: container port metrics = %q, want %s", c, got, want)
				}
				if !hasSvc {
					t.Fatalf("no Service %s-metrics", name)
				}
				podLabels := path(t, d.Spec, "template", "metadata", "labels").(map[string]any)
				for k, v := range path(t, svc.Spec, "selector").(map[string]any) {
					if podLabels[k] != v {
						t.Errorf("Service %s selects %s=%v, the %s Pods have %v", svc.Metadata.Name, k, v, c, podLabels[k])
					}
				}
				if diff := cmp.Diff(map[string]string{"metrics": fmt.Sprintf("%d->metrics", tt.wantPort)}, portsByName(t, svc.Spec["ports"])); diff != "" {
					t.Errorf("Service %s ports (-want +got):\n%s", svc.Metadata.Name, diff)
				}
				// The rule that admits the metrics port admits exactly the
				// configured peers.
				var from any
				for _, r := range path(t, np.Spec, "ingress").([]any) {
					rule := r.(map[string]any)
					if fmt.Sprint(path(t, rule, "ports", 0, "port")) == strconv.Itoa(tt.wantPort) {
						from = rule["from"]
					}
				}
				want := []any{map[string]any{
					"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}},
					"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}},
				}}
				if diff := cmp.Diff(want, from); diff != "" {
					t.Errorf("NetworkPolicy %s: peers of the metrics port (-want +got):\n%s", np.Metadata.Name, diff)
				}
			}
			if _, ok := objs["Deployment/"+release+"-occ-worker"]; ok != (len(tt.components) == 2) {
				t.Errorf("worker Deployment rendered: %v, want %v", ok, len(tt.components) == 2)
			}

			sm, ok := objs["ServiceMonitor/"+release+"-occ"]
			if ok != tt.monitor {
				t.Fatalf("ServiceMonitor rendered: %v, want %v", ok, tt.monitor)
			}
			if !tt.monitor {
				return
			}
			if sm.Metadata.Labels["release"] != "kube-prometheus-stack" {
				t.Errorf("ServiceMonitor labels %v lack metrics.serviceMonitor.labels", sm.Metadata.Labels)
			}
			selector := path(t, sm.Spec, "selector", "matchLabels").(map[string]any)
			var selected []string
			for key, o := range objs {
				if o.Kind != "Service" {
					continue
				}
				all := true
				for k, v := range selector {
					all = all && o.Metadata.Labels[k] == v
				}
				if all {
					selected = append(selected, key)
				}
			}
			wantSelected := []string{"Service/" + release + "-occ-api-metrics", "Service/" + release + "-occ-worker-metrics"}
			if diff := cmp.Diff(wantSelected, selected, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("ServiceMonitor selects (-want +got):\n%s", diff)
			}
			// The alert rules select job="occ": the jobLabel's value on
			// the selected Services.
			jobLabel := path(t, sm.Spec, "jobLabel").(string)
			for _, key := range selected {
				if job := objs[key].Metadata.Labels[jobLabel]; job != "occ" {
					t.Errorf("%s: job label %s = %q, want occ", key, jobLabel, job)
				}
			}
			// The alert rules keep installations apart by namespace (which the
			// Prometheus Operator sets on every target) and
			// app_kubernetes_io_instance: the Operator's name for a Service label
			// the ServiceMonitor's targetLabels copy onto its targets (every
			// character outside [a-zA-Z0-9_] becomes _), the release's name on
			// the selected Services.
			var instanceLabel string
			if tl, ok := sm.Spec["targetLabels"].([]any); ok {
				for _, l := range tl {
					if l == "app.kubernetes.io/instance" {
						instanceLabel = l.(string)
					}
				}
			}
			if instanceLabel == "" {
				t.Errorf("ServiceMonitor targetLabels %v, want app.kubernetes.io/instance (the alert rules group by app_kubernetes_io_instance)", sm.Spec["targetLabels"])
			}
			if got := regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(instanceLabel, "_"); instanceLabel != "" && got != "app_kubernetes_io_instance" {
				t.Errorf("targetLabels %s becomes the target label %s, not the rules' app_kubernetes_io_instance", instanceLabel, got)
			}
			for _, key := range selected {
				if v := objs[key].Metadata.Labels["app.kubernetes.io/instance"]; v != release {
					t.Errorf("%s: label app.kubernetes.io/instance = %q, want the release %s", key, v, release)
				}
			}
			if port := path(t, sm.Spec, "endpoints", 0, "port"); port != "metrics" {
				t.Errorf("ServiceMonitor scrapes port %v, want metrics", port)
			}
		})
	}
}

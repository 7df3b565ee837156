package chart

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/internal/server"
)

// probeSeconds reads an int field of a probe, or Kubernetes's default when
// it is not set.
func probeSeconds(probe map[string]any, field string, def int) int {
	if v, ok := probe[field]; ok {
		return int(v.(float64))
	}
	return def
}

// TestProbes checks the API container's probes against internal/server:
// each asks a GET probe route of the server's route table on the named
// port "http"; liveness and startup ask /healthz, which does not depend on
// the database (a database outage must not restart every API Pod), and
// readiness asks /readyz, with a timeout longer than the database ping
// Health.Ready allows (measured here, not copied). The startup probe gives
// occ as long as the migration Job's deadline before liveness may restart
// it: with SQLite, or migration.enabled false, occ server migrates before
// it listens.
func TestProbes(t *testing.T) {
	probeRoutes := map[string]bool{}
	for _, rt := range server.Routes(nil, &server.Health{}) {
		if rt.Auth == server.Probe && rt.Method == http.MethodGet {
			probeRoutes[rt.Path] = true
		}
	}
	var pingBound time.Duration
	h := &server.Health{Ping: func(ctx context.Context) error {
		if dl, ok := ctx.Deadline(); ok {
			pingBound = time.Until(dl)
		}
		return nil
	}}
	h.Ready(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if pingBound <= 0 {
		t.Fatal("Health.Ready gave its database ping no deadline; the readiness timeout below has nothing to exceed")
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Migration struct {
			ActiveDeadlineSeconds int `json:"activeDeadlineSeconds"`
		} `json:"migration"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		sets []string
	}{
		{"postgres", nil},
		{"postgres without the migration Job", []string{"migration.enabled=false"}},
		{"sqlite", []string{"database.mode=sqlite"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile("routing-off")}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := objects(t, out)["Deployment/"+release+"-occ-api"]
			if !ok {
				t.Fatal("no API Deployment")
			}
			c := path(t, d.Spec, "template", "spec", "containers", 0).(map[string]any)
			if port := portsByName(t, c["ports"])["http"]; port != "8080" {
				t.Errorf("container port http = %q, want 8080 (api.port)", port)
			}
			want := map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
			probes := map[string]map[string]any{}
			for kind, wantPath := range want {
				p, ok := c[kind].(map[string]any)
				if !ok {
					t.Errorf("the API container has no %s", kind)
					continue
				}
				probes[kind] = p
				get := path(t, p, "httpGet").(map[string]any)
				if get["path"] != wantPath || get["port"] != "http" {
					t.Errorf("%s asks %v on port %v, want %s on http", kind, get["path"], get["port"], wantPath)
				}
				if p, _ := get["path"].(string); !probeRoutes[p] {
					t.Errorf("%s asks %q, which is no GET probe route of internal/server", kind, p)
				}
			}
			if r := probes["readinessProbe"]; r != nil {
				if timeout := time.Duration(probeSeconds(r, "timeoutSeconds", 1)) * time.Second; timeout <= pingBound {
					t.Errorf("readiness timeout %s does not exceed /readyz's database ping bound %s", timeout, pingBound.Round(time.Second))
				}
			}
			if s := probes["startupProbe"]; s != nil {
				budget := probeSeconds(s, "periodSeconds", 10) * probeSeconds(s, "failureThreshold", 3)
				if budget < values.Migration.ActiveDeadlineSeconds {
					t.Errorf("the startup probe allows %d s, less than the migration deadline of %d s", budget, values.Migration.ActiveDeadlineSeconds)
				}
			}
		})
	}
}

// TestWorkerProbes checks the worker container's probes against
// internal/server's WorkerProbes: the named port "health" is
// worker.healthPort and the port of worker.healthListen in the rendered
// configuration (which occ loads); each probe asks a path that answers 200
// there when the loops progress and the database answers, and liveness
// and startup ask /healthz, which does not ping the database (an outage
// must not restart the worker); readiness waits longer than /readyz's
// ping bound. It also checks the refusal of a health port equal to the
// metrics port, which occ would refuse at start.
func TestWorkerProbes(t *testing.T) {
	var pingBound time.Duration
	probes := server.WorkerProbes(&server.Health{
		Loops: func() error { return nil },
		Ping: func(ctx context.Context) error {
			if dl, ok := ctx.Deadline(); ok {
				pingBound = time.Until(dl)
			}
			return nil
		}}, slog.New(slog.DiscardHandler))
	answers := func(p string) int {
		rec := httptest.NewRecorder()
		probes.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		return rec.Code
	}
	for _, tt := range []struct {
		name string
		sets []string
		port string
	}{
		{"default port", nil, "8081"},
		{"the highest port", []string{"worker.healthPort=65535"}, "65535"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile("metrics")}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			d, ok := objs["Deployment/"+release+"-occ-worker"]
			if !ok {
				t.Fatal("no worker Deployment")
			}
			c := path(t, d.Spec, "template", "spec", "containers", 0).(map[string]any)
			if got := portsByName(t, c["ports"])["health"]; got != tt.port {
				t.Errorf("container port health = %q, want %s", got, tt.port)
			}
			cfg, _ := occConfig(t, objs, release+"-occ-config")
			if want := "0.0.0.0:" + tt.port; cfg.WorkerHealthListen != want {
				t.Errorf("worker.healthListen = %q, want %q", cfg.WorkerHealthListen, want)
			}
			want := map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
			for kind, wantPath := range want {
				p, ok := c[kind].(map[string]any)
				if !ok {
					t.Errorf("the worker container has no %s", kind)
					continue
				}
				get := path(t, p, "httpGet").(map[string]any)
				if get["path"] != wantPath || get["port"] != "health" {
					t.Errorf("%s asks %v on port %v, want %s on health", kind, get["path"], get["port"], wantPath)
				}
				pingBound = 0
				if code := answers(get["path"].(string)); code != http.StatusOK {
					t.Errorf("%s asks %v, which server.WorkerProbes answers %d", kind, get["path"], code)
				}
				if kind != "readinessProbe" && pingBound != 0 {
					t.Errorf("%s asks %v, which pings the database", kind, get["path"])
				}
				if kind == "readinessProbe" {
					if pingBound <= 0 {
						t.Errorf("/readyz gave its database ping no deadline")
					} else if timeout := time.Duration(probeSeconds(p, "timeoutSeconds", 1)) * time.Second; timeout <= pingBound {
						t.Errorf("readiness timeout %s does not exceed /readyz's database ping bound %s", timeout, pingBound.Round(time.Second))
					}
				}
			}
		})
	}
	t.Run("health port on the metrics port", func(t *testing.T) {
		_, err := render(t, []string{valuesFile("metrics")}, "worker.healthPort=9464")
		const msg = "metrics.port and worker.healthPort are both 9464; the worker's probes need a port of their own"
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("render with the health port on the metrics port: %v, want %q", err, msg)
		}
	})
	t.Run("sqlite has no worker probes", func(t *testing.T) {
		out, err := render(t, []string{valuesFile("routing-off")}, "database.mode=sqlite")
		if err != nil {
			t.Fatal(err)
		}
		objs := objects(t, out)
		if _, ok := objs["Deployment/"+release+"-occ-worker"]; ok {
			t.Error("a worker Deployment with database.mode sqlite")
		}
		if cfg, _ := occConfig(t, objs, release+"-occ-config"); cfg.WorkerHealthListen != "" {
			t.Errorf("worker.healthListen = %q with database.mode sqlite, want none", cfg.WorkerHealthListen)
		}
	})
}

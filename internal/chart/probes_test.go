package chart

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

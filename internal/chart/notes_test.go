package chart

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderNotes renders the chart's NOTES.txt, which helm template leaves
// out: a copy of the chart gets it again as the text of a ConfigMap, each
// line indented so that the template's own whitespace trimming keeps it
// inside the block. It returns the notes and the chart's objects.
func renderNotes(t *testing.T, release, file string, sets ...string) (string, map[string]object) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "occ")
	err := filepath.WalkDir(chartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(chartDir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  notes: |\n    " +
		strings.ReplaceAll(string(notes), "\n", "\n    ")
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-under-test.yaml"), []byte(wrapped), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"template", release, dir, "--namespace", namespace, "--kube-version", kubeVersion, "--values", valuesFile(file)}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, out)
	cm, ok := objs["ConfigMap/notes-under-test"]
	if !ok {
		t.Fatal("the notes did not render")
	}
	delete(objs, "ConfigMap/notes-under-test")
	return cm.Data["notes"], objs
}

// TestNotes checks that what NOTES.txt tells the operator names what the
// chart renders: the image, the API's Deployment and Service, each metrics
// Service, the Gateway and the trusted proxy CIDRs of the configuration.
func TestNotes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		release string
		file    string
		sets    []string
	}{
		{"routing off", release, "routing-off", nil},
		{"metrics", release, "metrics", nil},
		{"metrics, the longest release name", strings.Repeat("r", 53), "metrics", nil},
		{"metrics, sqlite", release, "metrics", []string{"database.mode=sqlite", "metrics.serviceMonitor.enabled=false"}},
		{"routing with an issuer", release, "routing-issuer", nil},
		{"routing with the chart's CA", release, "routing-auto-ca", []string{"image.tag=1.2.3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			notes, objs := renderNotes(t, tt.release, tt.file, tt.sets...)
			fullname := (tt.release + "-occ")[:min(50, len(tt.release)+4)]
			api, ok := objs["Deployment/"+fullname+"-api"]
			if !ok {
				t.Fatalf("no Deployment %s-api", fullname)
			}
			if _, ok := objs["Service/"+api.Metadata.Name]; !ok {
				t.Errorf("no Service %s", api.Metadata.Name)
			}
			image := path(t, api.Spec, "template", "spec", "containers", 0, "image").(string)
			want := []string{"OCC (" + image + ")", "deploy/" + api.Metadata.Name,
				"http://" + api.Metadata.Name + "." + namespace + ".svc:8080"}
			_, kc := occConfig(t, objs, fullname+"-config")
			for _, o := range objs {
				switch {
				case o.Kind == "Service" && o.Metadata.Labels["openclaw.dev/metrics"] == "true":
					want = append(want, "http://"+o.Metadata.Name+"."+namespace+".svc:9464/metrics")
				case o.Kind == "Gateway":
					want = append(want, "get gateway "+o.Metadata.Name, "gatewayTrustedProxyCidrs ("+strings.Join(kc.Network.GatewayTrustedProxyCIDRs, ", ")+")")
				}
			}
			for _, w := range want {
				if !strings.Contains(notes, w) {
					t.Errorf("the notes do not say %q:\n%s", w, notes)
				}
			}
		})
	}
}

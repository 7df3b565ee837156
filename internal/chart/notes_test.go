package chart

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			want := []string{"OCC (" + image + ")", "http://" + api.Metadata.Name + "." + namespace + ".svc:8080"}
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

// TestNotesAdminPassword: without bootstrapAdmin.passwordSecretName the
// API Pod that wins the bootstrap prints the generated password once, and
// with api.replicas above 1 that is any of them. The command the notes
// give reads every API Pod's whole log (a selector makes kubectl logs
// print the last 10 lines of each by default), names each line's Pod, and
// selects exactly the API Deployment's Pods: its selector's labels, which
// match no other workload's Pod template.
func TestNotesAdminPassword(t *testing.T) {
	for _, replicas := range []string{"1", "3"} {
		t.Run("api.replicas="+replicas, func(t *testing.T) {
			notes, objs := renderNotes(t, release, "routing-off", "api.replicas="+replicas)
			var cmd string
			for _, line := range strings.Split(notes, "\n") {
				if strings.Contains(line, "kubectl") && strings.Contains(line, " logs ") {
					cmd = strings.TrimSpace(line)
				}
			}
			if cmd == "" {
				t.Fatalf("the notes give no kubectl logs command:\n%s", notes)
			}
			args := strings.Fields(cmd)
			selector := ""
			for i, a := range args {
				if a == "-l" && i+1 < len(args) {
					selector = args[i+1]
				}
			}
			for _, flag := range []string{"--prefix", "--tail=-1"} {
				if !slices.Contains(args, flag) {
					t.Errorf("the notes' command %q lacks %s", cmd, flag)
				}
			}
			if strings.Contains(cmd, "deploy/") {
				t.Errorf("the notes' command %q reads one Pod of the Deployment", cmd)
			}
			got := map[string]string{}
			for _, kv := range strings.Split(selector, ",") {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = v
			}
			api := objs["Deployment/"+release+"-occ-api"]
			want := map[string]string{}
			for k, v := range path(t, api.Spec, "selector", "matchLabels").(map[string]any) {
				want[k] = v.(string)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the notes' command %q selects other Pods than the API Deployment's selector (-want +got):\n%s", cmd, diff)
			}
			for key, o := range objs {
				if (o.Kind != "Deployment" && o.Kind != "Job") || key == "Deployment/"+api.Metadata.Name {
					continue
				}
				labels := path(t, o.Spec, "template", "metadata", "labels").(map[string]any)
				all := true
				for k, v := range got {
					all = all && labels[k] == v
				}
				if all {
					t.Errorf("the notes' selector %s also selects the Pods of %s", selector, key)
				}
			}
		})
	}
	t.Run("passwordSecretName", func(t *testing.T) {
		notes, _ := renderNotes(t, release, "routing-off", "bootstrapAdmin.passwordSecretName=occ-admin")
		if strings.Contains(notes, " logs ") || !strings.Contains(notes, "Secret occ-admin") {
			t.Errorf("with bootstrapAdmin.passwordSecretName the notes should name the Secret and read no log:\n%s", notes)
		}
	})
}

// TestNotesUpgradeTimeout: Helm waits for the pre-upgrade migration Job
// at most --timeout (5 minutes by default) while the Job may run
// migration.activeDeadlineSeconds; the command the notes give for upgrades
// passes a --timeout five minutes longer than that deadline (or than the
// API's 10-minute startup probe, which covers migrating at start).
func TestNotesUpgradeTimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
		want string
	}{
		{"default deadline", nil, "--timeout 900s"},
		{"longer deadline", []string{"migration.activeDeadlineSeconds=1800"}, "--timeout 2100s"},
		{"shorter deadline: the startup probe's 10 minutes", []string{"migration.activeDeadlineSeconds=120"}, "--timeout 900s"},
		{"sqlite", []string{"database.mode=sqlite"}, "--timeout 900s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			notes, _ := renderNotes(t, release, "routing-off", tt.sets...)
			var cmd string
			for _, line := range strings.Split(notes, "\n") {
				if strings.Contains(line, "helm upgrade "+release) {
					cmd = strings.TrimSpace(line)
				}
			}
			if !strings.Contains(cmd, "--wait") || !strings.Contains(cmd, tt.want) {
				t.Errorf("the notes' upgrade command %q, want --wait and %s:\n%s", cmd, tt.want, notes)
			}
		})
	}
}

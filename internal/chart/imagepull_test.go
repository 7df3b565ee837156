package chart

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// decodeObject finds the rendered object kind/name in manifest and decodes
// it into into; false when the render has no such object.
func decodeObject(t *testing.T, manifest, kind, name string, into any) bool {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if o.Kind != kind || o.Metadata.Name != name {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
		return true
	}
	return false
}

// podTemplate is the part of a Deployment or Job the test reads.
type podTemplate struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// TestImagePullSecrets: the top-level imagePullSecrets reach the driver as
// runtime.imagePullSecrets with the release namespace, the worker gets a
// Role in the release namespace that reads exactly those Secrets, bound to
// the ServiceAccount every Pod that runs the worker uses (the worker, or
// in the sqlite mode the API), and OCC's own Pods keep pulling with them.
// Without the value none of it is rendered.
func TestImagePullSecrets(t *testing.T) {
	names := []string{"registry-example-com", "mirror-credentials"}
	tests := []struct {
		name string
		file string
		sets []string
		want []string // the pull Secrets; nil: none
		pods []string // kind/name of every Pod template
	}{
		{"none", "routing-auto-ca", nil, nil, []string{"Deployment/oce-occ-api", "Deployment/oce-occ-worker", "Job/oce-occ-migrate"}},
		{"none, routing off", "routing-off", nil, nil, []string{"Deployment/oce-occ-api", "Deployment/oce-occ-worker", "Job/oce-occ-migrate"}},
		{"private registry", "private-registry", nil, names, []string{"Deployment/oce-occ-api", "Deployment/oce-occ-worker", "Job/oce-occ-migrate"}},
		{"one Secret, routing off", "routing-off", []string{"imagePullSecrets[0].name=regcred"}, []string{"regcred"},
			[]string{"Deployment/oce-occ-api", "Deployment/oce-occ-worker", "Job/oce-occ-migrate"}},
		{"sqlite: the API embeds the worker", "private-registry", []string{"database.mode=sqlite", "database.existingSecret="}, names,
			[]string{"Deployment/oce-occ-api"}},
	}
	const roleName = release + "-occ-worker-image-pull-secrets"
	workerSA := release + "-occ-worker"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile(tt.file)}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			_, kc := occConfig(t, objects(t, out), release+"-occ-config")
			wantNamespace := ""
			if tt.want != nil {
				wantNamespace = namespace
			}
			if diff := cmp.Diff(tt.want, kc.Runtime.ImagePullSecrets); diff != "" {
				t.Errorf("runtime.imagePullSecrets (-want +got):\n%s", diff)
			}
			if kc.Runtime.ImagePullSecretsNamespace != wantNamespace {
				t.Errorf("runtime.imagePullSecretsNamespace = %q, want %q", kc.Runtime.ImagePullSecretsNamespace, wantNamespace)
			}

			var role rbacv1.Role
			var binding rbacv1.RoleBinding
			hasRole := decodeObject(t, out, "Role", roleName, &role)
			hasBinding := decodeObject(t, out, "RoleBinding", roleName, &binding)
			if tt.want == nil {
				if hasRole || hasBinding {
					t.Errorf("without imagePullSecrets: Role %t, RoleBinding %t rendered, want neither", hasRole, hasBinding)
				}
			} else {
				wantRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: tt.want}}
				if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
					t.Errorf("Role %s rules (found %t) (-want +got):\n%s", roleName, hasRole, diff)
				}
				wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName}
				wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: workerSA, Namespace: namespace}}
				if diff := cmp.Diff(wantRef, binding.RoleRef); diff != "" {
					t.Errorf("RoleBinding %s roleRef (found %t) (-want +got):\n%s", roleName, hasBinding, diff)
				}
				if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" {
					t.Errorf("RoleBinding %s subjects (-want +got):\n%s", roleName, diff)
				}
				// Namespaced without a namespace field: helm puts them into
				// the release namespace, where the Secrets are.
				if role.Namespace != "" || binding.Namespace != "" {
					t.Errorf("Role and RoleBinding name namespaces %q and %q; the release's is meant", role.Namespace, binding.Namespace)
				}
			}

			var wantRefs []corev1.LocalObjectReference
			for _, n := range tt.want {
				wantRefs = append(wantRefs, corev1.LocalObjectReference{Name: n})
			}
			runsWorker := 0
			for _, key := range tt.pods {
				kind, name, _ := strings.Cut(key, "/")
				var pt podTemplate
				if !decodeObject(t, out, kind, name, &pt) {
					t.Fatalf("no %s in the render", key)
				}
				spec := pt.Spec.Template.Spec
				if diff := cmp.Diff(wantRefs, spec.ImagePullSecrets); diff != "" {
					t.Errorf("%s imagePullSecrets (-want +got):\n%s", key, diff)
				}
				if worker(spec) {
					runsWorker++
					if spec.ServiceAccountName != workerSA {
						t.Errorf("%s runs the worker as %q; the pull Secrets' RoleBinding binds %q", key, spec.ServiceAccountName, workerSA)
					}
				}
			}
			if runsWorker != 1 {
				t.Errorf("%d Pod templates run the worker, want 1", runsWorker)
			}
		})
	}
}

// worker reports whether a Pod runs the deployment worker: occ worker, or
// occ server with the worker embedded.
func worker(spec corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if len(c.Args) > 0 && c.Args[0] == "worker" {
			return true
		}
		for _, e := range c.Env {
			if e.Name == "OCC_EMBEDDED_WORKER" && e.Value == "true" {
				return true
			}
		}
	}
	return false
}

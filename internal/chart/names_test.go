package chart

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
)

// TestNameLengths renders every value set, SQLite with metrics, and
// PostgreSQL with the PodDisruptionBudgets, for the longest release names
// Helm accepts (53 characters, with and without "occ") in the longest
// namespace, and checks each object's name as the API server validates it
// for its kind, and every label value: a name that is too long for one
// kind fails helm install halfway, which helm template does not notice.
func TestNameLengths(t *testing.T) {
	releases := []string{strings.Repeat("r", 53), "occ" + strings.Repeat("r", 50)}
	longNamespace := strings.Repeat("n", 63)
	type valueSet struct {
		file string
		sets []string
	}
	sets := []valueSet{
		{"metrics", []string{"database.mode=sqlite", "metrics.serviceMonitor.enabled=false"}},
		{"routing-auto-ca", []string{"podDisruptionBudget.enabled=true"}},
	}
	for _, vs := range valueSets {
		sets = append(sets, valueSet{vs, nil})
	}
	for _, rel := range releases {
		for _, vs := range sets {
			out, err := renderAs(t, rel, longNamespace, []string{valuesFile(vs.file)}, vs.sets...)
			if err != nil {
				t.Fatal(err)
			}
			for key, o := range objects(t, out) {
				var errs []string
				switch o.Kind {
				case "Service":
					// A Service's name is a DNS label (RFC 1035).
					errs = validation.IsDNS1035Label(o.Metadata.Name)
				case "Job", "Gateway":
					// Their names become label values on the Pods
					// (job-name, gateway.envoyproxy.io/owning-gateway-name).
					errs = validation.IsDNS1123Label(o.Metadata.Name)
				default:
					errs = validation.IsDNS1123Subdomain(o.Metadata.Name)
				}
				for k, v := range o.Metadata.Labels {
					for _, e := range validation.IsValidLabelValue(v) {
						errs = append(errs, "label "+k+": "+e)
					}
				}
				if len(errs) > 0 {
					t.Errorf("release %s, %s %v: %s (%d characters): %s", rel, vs.file, vs.sets, key, len(o.Metadata.Name), strings.Join(errs, "; "))
				}
			}
		}
	}
}

// TestRoutingNameTruncation: the two routing names the chart cuts to size
// are tested at their limits and one past. The Gateway's default name,
// "<release>-agent-gateways", is at most 63 characters (a release of 48
// gives exactly 63; one of 49 is cut to 63); the Envoy data-plane
// NetworkPolicy takes at most 34 characters of the release, without a
// "-" left at the cut.
func TestRoutingNameTruncation(t *testing.T) {
	tests := []struct {
		release           string
		gateway, npPrefix string
	}{
		{strings.Repeat("g", 48), strings.Repeat("g", 48) + "-agent-gateways", strings.Repeat("g", 34) + "-"},
		{strings.Repeat("g", 49), strings.Repeat("g", 49) + "-agent-gateway", strings.Repeat("g", 34) + "-"},
		{strings.Repeat("p", 34), strings.Repeat("p", 34) + "-agent-gateways", strings.Repeat("p", 34) + "-"},
		{strings.Repeat("p", 33) + "-q", strings.Repeat("p", 33) + "-q-agent-gateways", strings.Repeat("p", 33) + "-"},
	}
	for _, tc := range tests {
		out, err := renderAs(t, tc.release, "occ-system", []string{valuesFile("routing-auto-ca")})
		if err != nil {
			t.Fatal(err)
		}
		var gateway, np string
		for _, o := range objects(t, out) {
			switch {
			case o.Kind == "Gateway":
				gateway = o.Metadata.Name
			case o.Kind == "NetworkPolicy" && strings.HasSuffix(o.Metadata.Name, "-envoy-dataplane"):
				np = o.Metadata.Name
			}
		}
		if gateway != tc.gateway || len(gateway) > 63 {
			t.Errorf("release of %d characters: Gateway %q (%d characters), want %q", len(tc.release), gateway, len(gateway), tc.gateway)
		}
		// <release[:34] without a trailing "-">-<route label, 12 hex>-envoy-dataplane
		if !strings.HasPrefix(np, tc.npPrefix) || len(np) != len(tc.npPrefix)+12+len("-envoy-dataplane") {
			t.Errorf("release of %d characters: data-plane NetworkPolicy %q, want the prefix %q and a 12-digit route label", len(tc.release), np, tc.npPrefix)
		}
	}
}

// clusterScopedKinds are the kinds of the chart's cluster-scoped objects.
var clusterScopedKinds = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// TestClusterScopedNames: releases whose namespace and full name read the
// same once cut to size get different cluster-scoped names (one release
// would otherwise fail on, or with helm's --take-ownership take over, the
// other's ClusterRoles and admission policy), and within each release every
// reference to a cluster-scoped object (the bindings' roleRef and
// policyName, the bind permission, the admission policy's roleRef check,
// the driver's tenantAccess.clusterRole) names one the release renders,
// and every ServiceAccount they name is the release's. Up to 55 characters
// the stem is "<namespace>-<fullname>" as in earlier chart versions (the
// tenant ClusterRole's name is in every tenant namespace's RoleBinding,
// whose roleRef cannot change); past that, 44 of them, "-" and 10 hex
// digits of sha256("<namespace>/<fullname>").
func TestClusterScopedNames(t *testing.T) {
	ns60 := strings.Repeat("n", 60)
	prefix55 := strings.Repeat("s", 55)
	groups := []struct {
		name     string
		installs [][2]string // release, namespace
	}{
		{"two releases in one 60-character namespace", [][2]string{{"alpha", ns60}, {"beta", ns60}}},
		{"two namespaces sharing 55 characters", [][2]string{{"occ", prefix55 + "-one"}, {"occ", prefix55 + "-two"}}},
		{"two releases that differ past the cut", [][2]string{{"tenant-gateways-production-europe-west-a", namespace}, {"tenant-gateways-production-europe-west-b", namespace}}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			owner := map[string]string{} // kind/name -> namespace/release
			for _, in := range g.installs {
				rel, ns := in[0], in[1]
				out, err := renderAs(t, rel, ns, []string{valuesFile("routing-auto-ca")})
				if err != nil {
					t.Fatal(err)
				}
				names := checkClusterReferences(t, out, rel, ns)
				if len(names) != 5 {
					t.Errorf("release %s in %s: cluster-scoped objects %v, want 5", rel, ns, names)
				}
				for _, n := range names {
					if prev, ok := owner[n]; ok {
						t.Errorf("%s is rendered by both %s and %s/%s", n, prev, ns, rel)
					}
					owner[n] = ns + "/" + rel
				}
			}
		})
	}

	stems := []struct {
		namespace, stem string
	}{
		{namespace, namespace + "-" + release + "-occ"},
		{strings.Repeat("n", 47), strings.Repeat("n", 47) + "-" + release + "-occ"}, // 55 characters
		{strings.Repeat("n", 48), strings.Repeat("n", 44) + "-" + kubecfg.HashHex(strings.Repeat("n", 48)+"/"+release+"-occ", 10)},
		{strings.Repeat("n", 40) + "-abcdefgh", strings.Repeat("n", 40) + "-abc-" + kubecfg.HashHex(strings.Repeat("n", 40)+"-abcdefgh/"+release+"-occ", 10)},
		// No "-" is left at the cut.
		{strings.Repeat("n", 43) + "-xxxxxxxx", strings.Repeat("n", 43) + "-" + kubecfg.HashHex(strings.Repeat("n", 43)+"-xxxxxxxx/"+release+"-occ", 10)},
	}
	for _, tt := range stems {
		out, err := renderAs(t, release, tt.namespace, []string{valuesFile("routing-off")})
		if err != nil {
			t.Fatal(err)
		}
		names := checkClusterReferences(t, out, release, tt.namespace)
		var want []string
		for _, n := range []string{"ClusterRole/%s-worker", "ClusterRoleBinding/%s-worker", "ClusterRole/%s-tenant",
			"ValidatingAdmissionPolicy/%s-worker-scope", "ValidatingAdmissionPolicyBinding/%s-worker-scope"} {
			want = append(want, fmt.Sprintf(n, tt.stem))
		}
		slices.Sort(names)
		slices.Sort(want)
		if diff := cmp.Diff(want, names); diff != "" || len(tt.stem) > 55 {
			t.Errorf("namespace of %d characters: cluster-scoped objects (-want +got):\n%s", len(tt.namespace), diff)
		}
	}
}

// checkClusterReferences checks that every reference to a cluster-scoped
// object or a ServiceAccount in the render of release rel in namespace ns
// resolves within that render, and returns the cluster-scoped objects as
// kind/name.
func checkClusterReferences(t *testing.T, manifest, rel, ns string) []string {
	t.Helper()
	type doc struct {
		Kind     string              `json:"kind"`
		Metadata objectMeta          `json:"metadata"`
		Spec     map[string]any      `json:"spec"`
		RoleRef  rbacv1.RoleRef      `json:"roleRef"`
		Subjects []rbacv1.Subject    `json:"subjects"`
		Rules    []rbacv1.PolicyRule `json:"rules"`
	}
	var docs []doc
	have := map[string]bool{}
	var cluster []string
	for _, raw := range strings.Split(manifest, "\n---\n") {
		var d doc
		if err := yaml.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, raw)
		}
		if d.Kind == "" {
			continue
		}
		docs = append(docs, d)
		have[d.Kind+"/"+d.Metadata.Name] = true
		if clusterScopedKinds[d.Kind] {
			cluster = append(cluster, d.Kind+"/"+d.Metadata.Name)
		}
	}
	where := "release " + rel + " in " + ns
	ref := func(what, kind, name string) {
		t.Helper()
		if !have[kind+"/"+name] {
			t.Errorf("%s: %s names %s %q, which the release does not render", where, what, kind, name)
		}
	}
	saRef := func(what, name, namespace string) {
		t.Helper()
		if namespace != ns {
			t.Errorf("%s: %s names ServiceAccount %s/%s, outside the release namespace", where, what, namespace, name)
		}
		ref(what, "ServiceAccount", name)
	}
	roleCheck := regexp.MustCompile(`object\.roleRef\.name == '([^']*)'`)
	subjectCheck := regexp.MustCompile(`s\.name == '([^']*)' && s\.namespace == '([^']*)'`)
	userCheck := regexp.MustCompile(`request\.userInfo\.username == "system:serviceaccount:([^:"]*):([^"]*)"`)
	for _, d := range docs {
		what := d.Kind + " " + d.Metadata.Name
		switch d.Kind {
		case "ClusterRoleBinding":
			ref(what+" roleRef", d.RoleRef.Kind, d.RoleRef.Name)
			if len(d.Subjects) == 0 {
				t.Errorf("%s: %s has no subjects", where, what)
			}
			for _, s := range d.Subjects {
				saRef(what+" subject", s.Name, s.Namespace)
			}
		case "ClusterRole":
			for _, r := range d.Rules {
				if slices.Contains(r.Resources, "clusterroles") {
					if len(r.ResourceNames) == 0 {
						t.Errorf("%s: %s may %v every ClusterRole", where, what, r.Verbs)
					}
					for _, n := range r.ResourceNames {
						ref(what+" "+strings.Join(r.Verbs, ","), "ClusterRole", n)
					}
				}
			}
		case "ValidatingAdmissionPolicyBinding":
			policy, _ := d.Spec["policyName"].(string)
			ref(what+" policyName", "ValidatingAdmissionPolicy", policy)
		case "ValidatingAdmissionPolicy":
			spec, err := yaml.Marshal(d.Spec)
			if err != nil {
				t.Fatal(err)
			}
			checks := map[string][][]string{
				"roleRef check": roleCheck.FindAllStringSubmatch(string(spec), -1),
				"subject check": subjectCheck.FindAllStringSubmatch(string(spec), -1),
				"match":         userCheck.FindAllStringSubmatch(string(spec), -1),
			}
			for name, found := range checks {
				if len(found) == 0 {
					t.Errorf("%s: %s has no %s", where, what, name)
				}
			}
			for _, m := range checks["roleRef check"] {
				ref(what+" roleRef check", "ClusterRole", m[1])
			}
			for _, m := range checks["subject check"] {
				saRef(what+" subject check", m[1], m[2])
			}
			for _, m := range checks["match"] {
				saRef(what+" match condition", m[2], m[1])
			}
		}
	}
	fullname := rel + "-occ"
	if strings.Contains(rel, "occ") {
		fullname = rel
	}
	_, kc := occConfig(t, objects(t, manifest), fullname+"-config")
	if ta := kc.TenantAccess; ta == nil {
		t.Errorf("%s: the configuration has no tenantAccess", where)
	} else {
		ref("tenantAccess.clusterRole", "ClusterRole", ta.ClusterRole)
		saRef("tenantAccess", ta.ServiceAccountName, ta.ServiceAccountNamespace)
	}
	return cluster
}

// TestWorkerRoleBindingRules: the worker's ClusterRole lets it delete
// exactly the RoleBinding the driver applies in each tenant namespace
// (kube.TenantAccessBinding), which it replaces when the tenant
// ClusterRole's name changes (a roleRef cannot change), and no other; it
// never updates one. TestRBAC checks the same on the API server.
func TestWorkerRoleBindingRules(t *testing.T) {
	out, err := render(t, []string{valuesFile("routing-auto-ca")})
	if err != nil {
		t.Fatal(err)
	}
	name := namespace + "-" + release + "-occ-worker"
	for _, raw := range strings.Split(out, "\n---\n") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(raw), &role); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, raw)
		}
		if role.Kind != "ClusterRole" || role.Name != name {
			continue
		}
		got := map[string][]string{} // verb -> resourceNames ("*" for all)
		for _, r := range role.Rules {
			if !slices.Contains(r.Resources, "rolebindings") {
				continue
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{"*"}
			}
			for _, v := range r.Verbs {
				got[v] = append(got[v], names...)
			}
		}
		want := map[string][]string{"get": {"*"}, "create": {"*"}, "patch": {"*"}, "delete": {kube.TenantAccessBinding}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ClusterRole %s: rolebindings verbs -> names (-want +got):\n%s", name, diff)
		}
		return
	}
	t.Fatalf("no ClusterRole %s in the render", name)
}

package chart

import (
	"regexp"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/ids"
)

// TestAdmissionPolicyTenantNames: the pattern admission-policy.yaml holds
// a namespace's name to (the worker may create, change and delete only
// those namespaces, and bind its tenant role only in them) is the driver's
// own naming, kube.TenantNamespace, and nothing looser. CEL's matches() is
// RE2, as Go's regexp is. TestRBAC checks the policy's decisions on the
// API server.
func TestAdmissionPolicyTenantNames(t *testing.T) {
	out, err := render(t, []string{valuesFile("routing-off")})
	if err != nil {
		t.Fatal(err)
	}
	var policy string
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "\nkind: ValidatingAdmissionPolicy\n") {
			policy = doc
		}
	}
	if policy == "" {
		t.Fatal("helm template renders no ValidatingAdmissionPolicy")
	}
	found := regexp.MustCompile(`\.matches\('([^']*)'\)`).FindAllStringSubmatch(policy, -1)
	if len(found) < 2 {
		t.Fatalf("the admission policy holds namespace names to no pattern (%d matches() calls), want the tenant namespace's", len(found))
	}
	for _, f := range found {
		re, err := regexp.Compile(f[1])
		if err != nil {
			t.Fatalf("pattern %q: %v", f[1], err)
		}
		for range 20 {
			if name := kube.TenantNamespace(ids.New(ids.Namespace)); !re.MatchString(name) {
				t.Errorf("the admission policy's pattern %q refuses the driver's tenant namespace %q", f[1], name)
			}
		}
		tenant := kube.TenantNamespace(ids.New(ids.Namespace))
		for _, name := range []string{"default", "kube-system", namespace, "occ-", tenant + "0", "x" + tenant, tenant[:len(tenant)-1], "occ-ABCDEF0123456789abcdef01", "occt-" + tenant[4:]} {
			if re.MatchString(name) {
				t.Errorf("the admission policy's pattern %q admits %q, which is no tenant namespace", f[1], name)
			}
		}
	}
}

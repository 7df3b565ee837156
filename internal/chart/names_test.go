package chart

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
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

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

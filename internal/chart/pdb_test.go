package chart

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestPodDisruptionBudgets: with podDisruptionBudget.enabled every
// Deployment the chart renders (the API, and with PostgreSQL the worker)
// gets one policy/v1 PodDisruptionBudget of its own name whose selector is
// the Deployment's own and matches the Pod template of that Deployment and
// of no other workload in the render (the other Deployment, the migration
// Job); its spec carries the one field that is set, as an integer or a
// percentage string, and AlwaysAllow for unhealthy Pods. Off (the default)
// there is none.
func TestPodDisruptionBudgets(t *testing.T) {
	on := "podDisruptionBudget.enabled=true"
	tests := []struct {
		name        string
		sets        []string
		deployments []string // the components with a Deployment
		want        *policyv1.PodDisruptionBudgetSpec
	}{
		{"off", nil, []string{"api", "worker"}, nil},
		{"off, sqlite", []string{"database.mode=sqlite"}, []string{"api"}, nil},
		{"default maxUnavailable", []string{on}, []string{"api", "worker"},
			&policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		{"maxUnavailable percentage", []string{on, "podDisruptionBudget.maxUnavailable=50%"}, []string{"api", "worker"},
			&policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
		{"minAvailable", []string{`json:podDisruptionBudget={"enabled":true,"maxUnavailable":"","minAvailable":2}`, "api.replicas=3", "worker.replicas=3"},
			[]string{"api", "worker"}, &policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}},
		{"sqlite: the API only", []string{on, "database.mode=sqlite"}, []string{"api"},
			&policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile("routing-off")}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			var budgets, deployments []string
			for _, o := range objs {
				switch o.Kind {
				case "PodDisruptionBudget":
					budgets = append(budgets, o.Metadata.Name)
				case "Deployment":
					deployments = append(deployments, o.Metadata.Name)
				}
			}
			var wantDeployments, wantBudgets []string
			for _, c := range tt.deployments {
				wantDeployments = append(wantDeployments, release+"-occ-"+c)
			}
			if tt.want != nil {
				wantBudgets = wantDeployments
			}
			sortedDiff := func(what string, want, got []string) {
				t.Helper()
				slices.Sort(got)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s with %v (-want +got):\n%s", what, tt.sets, diff)
				}
			}
			sortedDiff("Deployments", wantDeployments, deployments)
			sortedDiff("PodDisruptionBudgets", wantBudgets, budgets)

			for _, name := range wantBudgets {
				var pdb policyv1.PodDisruptionBudget
				if !decodeObject(t, out, "PodDisruptionBudget", name, &pdb) {
					t.Fatalf("no PodDisruptionBudget %s", name)
				}
				deployment := objs["Deployment/"+name]
				want := tt.want.DeepCopy()
				want.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
				want.Selector = pdb.Spec.Selector // compared below
				if diff := cmp.Diff(*want, pdb.Spec); diff != "" {
					t.Errorf("PodDisruptionBudget %s spec (-want +got):\n%s", name, diff)
				}
				if diff := cmp.Diff(path(t, deployment.Spec, "selector", "matchLabels"), toAny(pdb.Spec.Selector.MatchLabels)); diff != "" {
					t.Errorf("PodDisruptionBudget %s selects other labels than its Deployment (-Deployment +budget):\n%s", name, diff)
				}
				selector := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
				for key, o := range objs {
					if o.Kind != "Deployment" && o.Kind != "Job" {
						continue
					}
					podLabels := labels.Set{}
					for k, v := range path(t, o.Spec, "template", "metadata", "labels").(map[string]any) {
						podLabels[k] = v.(string)
					}
					if got, want := selector.Matches(podLabels), key == "Deployment/"+name; got != want {
						t.Errorf("PodDisruptionBudget %s selects the Pods of %s: %v, want %v", name, key, got, want)
					}
				}
			}
		})
	}
}

// toAny is a string map as the decoded YAML of a render holds it.
func toAny(m map[string]string) any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

package kube

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAdmitsGateways: which NetworkPolicies of a tenant namespace, other
// than OCC's own, a reconciliation refuses.
func TestAdmitsGateways(t *testing.T) {
	cfg := baseConfig("occ-system", "")
	envoy := *RenderNamespaceEnvoyPeer(cfg)
	cidr := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	tests := []struct {
		name     string
		selector map[string]string
		types    []networkingv1.PolicyType
		rules    []networkingv1.NetworkPolicyIngressRule
		refused  bool
	}{
		{name: "every Pod, from a CIDR", types: ingress, rules: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{cidr}}}, refused: true},
		{name: "gateway Pods, from anywhere", selector: map[string]string{LabelWorkloadRole: WorkloadRoleGateway}, types: ingress,
			rules: []networkingv1.NetworkPolicyIngressRule{{}}, refused: true},
		{name: "one Agent's gateway, implicit type", selector: map[string]string{LabelAgent: "agt_x"},
			rules: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{cidr}}}, refused: true},
		{name: "only the Envoy peer", types: ingress, rules: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{envoy}}}},
		{name: "egress only", types: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
		{name: "ingress type without rules (deny)", types: ingress},
		{name: "other Pods by role", selector: map[string]string{LabelWorkloadRole: "harness"}, types: ingress,
			rules: []networkingv1.NetworkPolicyIngressRule{{}}},
		{name: "Pods with a label gateways never carry", selector: map[string]string{"app": "metrics"}, types: ingress,
			rules: []networkingv1.NetworkPolicyIngressRule{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: tc.selector}, PolicyTypes: tc.types, Ingress: tc.rules}}
			if got := admitsGateways(p, cfg) != ""; got != tc.refused {
				t.Errorf("refused = %v, want %v", got, tc.refused)
			}
		})
	}
}

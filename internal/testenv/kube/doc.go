// Package kube connects tests to the Kubernetes test environment: a real
// kube-apiserver with etcd, kube-controller-manager, kube-scheduler, one fake
// node run by kwok (pods become Running and Ready, no container runs), the
// Gateway API, Envoy Gateway and cert-manager CRDs, and the real Envoy Gateway
// controller, all on loopback. scripts/testenv/k8s.sh starts it and prints the
// variables this package reads:
//
//	scripts/testenv/k8s.sh start
//	eval "$(scripts/testenv/k8s.sh env)"
//	go test ./internal/testenv/kube/...
//
// (`make test-kubernetes` does exactly that; docs/testing.md has the details.)
//
// Env returns a [Cluster] for the environment named by OCC_TEST_KUBECONFIG.
// Without it, or when the API server does not answer, Env skips the test,
// except under CI=true, where it fails: a CI run that silently skipped the
// Kubernetes tests would prove nothing.
//
// The environment is shared by every test and every package, and it outlives
// the test process, so tests keep to namespaces of their own
// ([Cluster.NewNamespace]) and give cluster-scoped objects (GatewayClasses,
// say) unique names and a t.Cleanup that deletes them.
//
// The client's scheme knows the built-in types (core, apps, networking, ...),
// Gateway API v1 and v1beta1, and Envoy Gateway's v1alpha1 types; cert-manager
// objects go through unstructured.Unstructured. It is test support only;
// production code never imports it.
package kube

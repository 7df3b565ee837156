// Package chart owns the tests of OCC's Helm chart, deploy/helm/occ: helm
// lint, the golden output of helm template for the documented value sets,
// every refusal of values.schema.json, the agreement of the names and the
// hostname the chart derives with those the Kubernetes Compute driver
// derives from the configuration the chart renders, the documentation of
// every value (chart_test.go); the image pull Secrets the driver copies
// and the worker's Role that reads them (imagepull_test.go); the API's
// probes against internal/server's probe routes (probes_test.go); and, on
// the real test API server, helm
// install --wait, the Envoy Gateway controller's verdict on the chart's
// routing, its RBAC and admission policy, and a deployment by occ worker
// with only the worker ServiceAccount's token (cluster_test.go), and egctl's
// translation of the chart's routing with a driver-rendered route
// (egctl_test.go).
//
// It has no non-test code: the chart is the product, this package checks
// it. The helm binary comes from OCC_TEST_HELM (scripts/testenv/k8s.sh env
// prints it), the cluster from OCC_TEST_KUBECONFIG and the deployment
// test's database from OCC_TEST_POSTGRES_URL; without them the tests skip,
// and fail under CI=true. The deployment test runs this test binary as
// occ (TestMain), so no separate build is needed.
package chart

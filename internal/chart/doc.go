// Package chart owns the tests of OCC's Helm chart, deploy/helm/occ: helm
// lint, the golden output of helm template for the documented value sets,
// every refusal of values.schema.json, the agreement of the names and the
// hostname the chart derives with those the Kubernetes Compute driver
// derives from the configuration the chart renders, the documentation of
// every value, and the chart installed on the real test API server with
// its RBAC checked (cluster_test.go).
//
// It has no non-test code: the chart is the product, this package checks
// it. The helm binary comes from OCC_TEST_HELM (scripts/testenv/k8s.sh env
// prints it); without it the tests skip, and fail under CI=true.
package chart

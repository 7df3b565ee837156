package kube

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Manifest renders objects (with TypeMeta set, as every Render function
// sets it) as one multi-document YAML stream holding what the driver
// would apply: no status, no server-set or null fields. It is the input
// format of kubectl apply and egctl x translate.
//
// The installation-level routing (the shared Gateway, its EnvoyProxy and
// API-key SecurityPolicy, the certificates) is not rendered here: the Helm
// chart deploy/helm/occ is its one source, and the chart tests
// (internal/chart) prove that the names it derives are the driver's.
func Manifest(objs ...client.Object) ([]byte, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		u, err := toApply(obj)
		if err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("kube: YAML of %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

package routingops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
)

// Source says where the driver configuration comes from: File, an occ
// configuration file (the one the server runs with), or else the Helm
// chart's ConfigMap <release>-occ-config (key occ.yaml) in
// ReleaseNamespace, read with Kubeconfig.
type Source struct {
	Kubeconfig       string
	Context          string
	File             string
	Release          string
	ReleaseNamespace string
}

// ConfigMapName is the chart's configuration ConfigMap of a release (the
// chart's occ.fullname: the release name when it contains "occ", else
// <release>-occ, at most 50 characters, then -config).
func ConfigMapName(release string) string {
	full := release
	if !strings.Contains(release, "occ") {
		full = release + "-occ"
	}
	if len(full) > 50 {
		full = full[:50]
	}
	return strings.TrimSuffix(full, "-") + "-config"
}

// DriverConfig reads the Kubernetes driver's configuration from s and
// points it at the operator's kubeconfig (the file's own kubeconfig, if
// any, is the worker's credential, not the operator's).
func DriverConfig(ctx context.Context, s Source) (kube.Config, error) {
	if s.Kubeconfig == "" {
		return kube.Config{}, fmt.Errorf("--kubeconfig is required: the OCC API holds no Kubernetes permission, so this command reads the cluster with yours")
	}
	kc, err := filepath.Abs(s.Kubeconfig)
	if err != nil {
		return kube.Config{}, err
	}
	var data []byte
	var from string
	if s.File != "" {
		from = s.File
		if data, err = os.ReadFile(s.File); err != nil {
			return kube.Config{}, fmt.Errorf("read the configuration: %w", err)
		}
	} else {
		name := ConfigMapName(s.Release)
		from = "ConfigMap " + s.ReleaseNamespace + "/" + name
		if data, err = kube.ReadConfigMapKey(ctx, kc, s.Context, s.ReleaseNamespace, name, "occ.yaml"); err != nil {
			return kube.Config{}, fmt.Errorf("read the chart's configuration (give --config FILE to use a file instead): %w", err)
		}
	}
	cfg, err := config.DecodeFile(data, registry.ConfigTable())
	if err != nil {
		return kube.Config{}, fmt.Errorf("%s: %w", from, err)
	}
	sec := cfg.ComputeSections[kubecfg.DriverName]
	if sec == nil || cfg.ComputeDriver != kubecfg.DriverName {
		return kube.Config{}, fmt.Errorf("%s does not configure the %s driver (drivers.compute.driver and drivers.compute.%s)", from, kubecfg.DriverName, kubecfg.DriverName)
	}
	kcfg, err := kubecfg.FromSection(sec)
	if err != nil {
		return kube.Config{}, fmt.Errorf("%s: %w", from, err)
	}
	kcfg.Kubeconfig, kcfg.Context = kc, s.Context
	return kcfg, nil
}

// OpenCluster builds the driver on the operator's kubeconfig; it makes no
// API call.
func OpenCluster(cfg kube.Config) (*kube.Driver, error) {
	return kube.NewFromKubeconfig(cfg, kube.Options{ID: kubecfg.DriverName})
}

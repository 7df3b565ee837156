package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
)

// kubernetesFile selects the Kubernetes driver with routing and sets a few
// optional values; the rest must come out as kubecfg's defaults.
const kubernetesFile = `
drivers:
  compute:
    driver: kubernetes
    kubernetes:
      kubeconfig: /etc/occ/kubeconfig
      gatewayRouting:
        gatewayName: oce-agent-gateways
        gatewayNamespace: openclaw-system
        envoyNamespace: envoy-gateway-system
        endpointPort: 8443
      network:
        gatewayPort: 8080
        gatewayTrustedProxyCidrs: ["10.244.0.0/16"]
        dns:
          namespace: kube-system
      runtime:
        gatewayImage: registry.example/openclaw/gateway:2026.9.6
        occImage: registry.example/occ:1.0.0
        gatewayStorageClassName: fast-rwo
      resources:
        requests: {cpu: 500m, memory: 1Gi}
        limits: {memory: 3Gi}
`

func TestLoadKubernetesSection(t *testing.T) {
	got, err := Load(parseFlags(t, "--config", writeConfig(t, kubernetesFile)), nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &kubecfg.Config{
		Kubeconfig: "/etc/occ/kubeconfig",
		GatewayRouting: &kubecfg.GatewayRouting{
			GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system",
			EndpointPort: 8443, EnvoyHTTPSTargetPort: kubecfg.DefaultEnvoyHTTPSTargetPort,
		},
		Network: kubecfg.Network{
			GatewayPort:              8080,
			GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"},
			DNS:                      kubecfg.DNS{Namespace: "kube-system", PodLabels: kubecfg.DefaultDNSPodLabels()},
		},
		Runtime: kubecfg.Runtime{
			GatewayImage: "registry.example/openclaw/gateway:2026.9.6", OCCImage: "registry.example/occ:1.0.0",
			OCCBinaryPath: kubecfg.DefaultOCCBinaryPath, Node: kubecfg.DefaultNode,
			OpenClawExecutable: kubecfg.DefaultOpenClawExecutable, ImagePullPolicy: kubecfg.DefaultImagePullPolicy,
			GatewayStorageClassName: "fast-rwo", GatewayStorageSize: kubecfg.DefaultGatewayStorageSize,
		},
		Resources: kubecfg.Resources{
			Requests: kubecfg.ResourceList{CPU: "500m", Memory: "1Gi"},
			Limits:   kubecfg.ResourceList{Memory: "3Gi"},
		},
	}
	if got.ComputeDriver != "kubernetes" {
		t.Errorf("ComputeDriver = %q, want kubernetes", got.ComputeDriver)
	}
	if diff := cmp.Diff(want, got.Kubernetes); diff != "" {
		t.Errorf("Load(kubernetes file).Kubernetes mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadKubernetesErrors(t *testing.T) {
	// valid is the smallest valid section; cases break one thing.
	const valid = `drivers:
  compute:
    driver: kubernetes
    kubernetes:
      network:
        gatewayClients: ["10.0.0.0/8"]
      runtime:
        gatewayImage: gw:1
        occImage: occ:1
`
	tests := []struct {
		name string
		file string
		env  map[string]string
		want string // substring of the error
	}{
		{
			name: "unknown key in the section",
			file: strings.Replace(valid, "      network:", "      netwrk: {}\n      network:", 1),
			want: `line 5: unknown key "drivers.compute.kubernetes.netwrk"`,
		},
		{
			name: "unknown key in a nested section",
			file: strings.Replace(valid, "        gatewayClients:", "        gatewayClient: [\"10.0.0.0/8\"]\n        gatewayClients:", 1),
			want: `line 6: unknown key "drivers.compute.kubernetes.network.gatewayClient"`,
		},
		{
			name: "routing key misspelt",
			file: valid + "      gatewayRouting:\n        gatewayname: x\n",
			want: `unknown key "drivers.compute.kubernetes.gatewayRouting.gatewayname"`,
		},
		{
			name: "driver kubernetes without the section",
			file: "drivers:\n  compute:\n    driver: kubernetes\n",
			want: "compute driver kubernetes needs the drivers.compute.kubernetes section",
		},
		{
			name: "section with another driver",
			file: strings.Replace(valid, "driver: kubernetes", "driver: local", 1),
			want: `drivers.compute.kubernetes is set but the compute driver is "local"`,
		},
		{
			name: "section with the driver overridden by env",
			file: valid,
			env:  map[string]string{"OCC_COMPUTE_DRIVER": "none"},
			want: `drivers.compute.kubernetes is set but the compute driver is "none"`,
		},
		{
			name: "validation errors are prefixed with the section",
			file: strings.Replace(valid, `["10.0.0.0/8"]`, `["0.0.0.0/0"]`, 1),
			want: "drivers.compute.kubernetes.network.gatewayClients [0.0.0.0/0] admits every source address",
		},
		{
			name: "routing without trusted proxies",
			file: strings.Replace(valid, "      network:\n        gatewayClients: [\"10.0.0.0/8\"]\n",
				"      gatewayRouting: {gatewayName: gw, gatewayNamespace: occ, envoyNamespace: envoy}\n", 1),
			want: "drivers.compute.kubernetes.network.gatewayTrustedProxyCidrs is required with gatewayRouting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{EnvConfig: writeConfig(t, tt.file)}
			for k, v := range tt.env {
				env[k] = v
			}
			_, err := Load(nil, mapEnv(env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(file %q) error = %v, want it to contain %q", tt.file, err, tt.want)
			}
		})
	}

	t.Run("valid", func(t *testing.T) {
		if _, err := Load(nil, mapEnv(map[string]string{EnvConfig: writeConfig(t, valid)})); err != nil {
			t.Errorf("Load(minimal kubernetes file): %v", err)
		}
	})
}

// TestKubernetesDriverFlag: selecting the driver by flag or env needs the
// file's section; the section alone does not select it.
func TestKubernetesDriverFlag(t *testing.T) {
	_, err := Load(parseFlags(t, "--compute-driver", "kubernetes"), nil)
	if want := "compute driver kubernetes needs the drivers.compute.kubernetes section"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(--compute-driver kubernetes) error = %v, want %q", err, want)
	}
	_, err = Load(parseFlags(t, "--compute-driver", "docker"), nil)
	if want := `compute driver "docker" is not one of local, kubernetes, none`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(--compute-driver docker) error = %v, want %q", err, want)
	}
}

package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/testutil"
)

// unreachableDriver is a driver whose API server refuses connections: a
// loopback port that was free a moment ago.
func unreachableDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	c, err := NewClient(&rest.Config{Host: "http://" + testutil.RefusingAddr(t)})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	d, err := New(cfg, c, Options{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// TestAPIUnavailable: an API server that cannot be reached makes
// PrepareRevision pending with KUBERNETES_API_UNAVAILABLE (the worker polls
// again) and every other verb fail with a retryable error; nothing is
// permanent.
func TestAPIUnavailable(t *testing.T) {
	d := unreachableDriver(t, unitConfig())
	ctx := testCtx(t, 30*time.Second)
	rev := unitRevision(`{}`)
	res, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{WorkspaceSetup: unitSetup()})
	// The message is public: a fixed text, never the error's (which names
	// the API server's address).
	want := compute.PrepareResult{PendingReason: PendingKubernetesAPIUnavailable, Message: "The Kubernetes API server could not be reached; it is retried."}
	if diff := cmp.Diff(want, res); err != nil || diff != "" {
		t.Errorf("PrepareRevision = %v, (-want +got):\n%s", err, diff)
	}
	for name, call := range map[string]func() error{
		"EnsureNamespace":  func() error { return d.EnsureNamespace(ctx, compute.Namespace{ID: nsID}) },
		"DeleteNamespace":  func() error { return d.DeleteNamespace(ctx, compute.Namespace{ID: nsID}) },
		"ActivateRevision": func() error { return d.ActivateRevision(ctx, rev, compute.RevisionContext{}) },
		"StopRevision":     func() error { return d.StopRevision(ctx, rev) },
		"RetireRevision":   func() error { return d.RetireRevision(ctx, rev) },
		"DeleteAgent":      func() error { return d.DeleteAgent(ctx, compute.Agent{ID: agentID, NamespaceID: nsID}) },
	} {
		err := call()
		if err == nil {
			t.Errorf("%s with the API server down succeeded", name)
		} else if _, permanent := compute.AsPermanent(err); permanent {
			t.Errorf("%s with the API server down failed permanently: %v", name, err)
		}
	}
	// Endpoint needs no API call.
	if ep, err := d.Endpoint(ctx, rev); err != nil || ep.Transport != compute.Routed {
		t.Errorf("Endpoint = %+v, %v", ep, err)
	}
}

// TestConfigurationRefusedBeforeAnyCall: a Configuration that conflicts
// with the rendered authentication fails the deployment permanently, and
// is judged before the cluster is asked anything.
func TestConfigurationRefusedBeforeAnyCall(t *testing.T) {
	d := unreachableDriver(t, unitConfig())
	ctx := testCtx(t, 10*time.Second)
	for _, doc := range []string{
		`{"gateway":{"auth":{"mode":"token","token":"x"}}}`,
		`{"gateway":{"trustedProxies":["10.0.0.0/8"]}}`,
		`{"agents":{"entries":{"main":{},"other":{}}}}`,
	} {
		_, err := d.PrepareRevision(ctx, unitRevision(doc), compute.RevisionContext{})
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
			t.Errorf("PrepareRevision(%s) = %v, want permanent %s", doc, err, compute.CodeConfigurationInvalid)
		}
		err = d.ActivateRevision(ctx, unitRevision(doc), compute.RevisionContext{})
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
			t.Errorf("ActivateRevision(%s) = %v, want permanent %s", doc, err, compute.CodeConfigurationInvalid)
		}
	}
}

func TestNewValidates(t *testing.T) {
	bad := unitConfig()
	bad.Network.GatewayTrustedProxyCIDRs = []string{"0.0.0.0/0"}
	if _, err := New(bad, nopClient{}, Options{}); err == nil {
		t.Errorf("New with an all-source trusted range succeeded")
	}
	if _, err := New(unitConfig(), nil, Options{}); err == nil {
		t.Errorf("New without a client succeeded")
	}
	d, err := New(unitConfig(), nopClient{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.ID() != "kubernetes" || d.Capabilities() != (compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}) {
		t.Errorf("ID %q capabilities %+v", d.ID(), d.Capabilities())
	}
	direct, err := New(directConfig(), nopClient{}, Options{ID: "k8s-east"})
	if err != nil {
		t.Fatal(err)
	}
	if direct.ID() != "k8s-east" || direct.Capabilities().LiveFiles {
		t.Errorf("without routing: ID %q capabilities %+v", direct.ID(), direct.Capabilities())
	}
	if _, err := direct.Endpoint(context.Background(), unitRevision(`{}`)); !errors.Is(err, compute.ErrNoEndpoint) {
		t.Errorf("Endpoint without routing: %v, want ErrNoEndpoint", err)
	}
}

func TestNewFromKubeconfig(t *testing.T) {
	cfg := unitConfig()
	cfg.Kubeconfig = "/nonexistent/kubeconfig"
	if _, err := NewFromKubeconfig(cfg, Options{}); err == nil {
		t.Errorf("NewFromKubeconfig with a missing kubeconfig succeeded")
	}
}

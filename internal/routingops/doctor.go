package routingops

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/secretfile"
)

// Names of the probes and of the file read through OCC.
const (
	CheckProbeNoKey         = "probe-no-key"
	CheckProbeWrongKey      = "probe-wrong-key"
	CheckProbeSpoofIdentity = "probe-spoofed-identity"
	CheckFileRead           = "file-read"
)

// SkipProbes in DoctorOptions.Skip skips the three route probes.
const SkipProbes = "probes"

// CheckNames lists every check name --skip accepts, in the order the
// checks run.
var CheckNames = []string{
	kube.CheckGatewayAccepted, kube.CheckGatewayProgrammed, kube.CheckCertificateReady, kube.CheckCertificateHostname,
	kube.CheckSecurityPolicyAccepted, kube.CheckRouteAccepted, kube.CheckNamespaceLabel, kube.CheckIngressPolicy,
	CheckProbeNoKey, CheckProbeWrongKey, CheckProbeSpoofIdentity, CheckFileRead, SkipProbes,
}

// DoctorOptions configures Doctor.
type DoctorOptions struct {
	API     API
	Cluster Cluster
	// Namespaces to check the Agents of (every running Agent of each).
	Namespaces []apitypes.Namespace
	// Skip names checks this environment cannot make (for example
	// gateway-programmed where no Envoy data plane runs): they are still
	// made and shown, as skipped with what they saw, and do not fail the
	// run. Every skip is the operator's explicit choice.
	Skip []string
	// RouteAddress is host:port where the routed host's listener is
	// reached from here (kubectl port-forward to the Envoy Service); the
	// probes send the routed host as TLS server name and Host.
	RouteAddress string
	// CAFile is the PEM bundle that verifies the listener certificate;
	// empty uses the system roots.
	CAFile string
	// File is the workspace file read through OCC (default SOUL.md).
	File string
	// Timeout bounds each probe (default 10 s).
	Timeout time.Duration
}

// Report is the doctor's result.
type Report struct {
	Checks []kube.Check `json:"checks"`
	// Passed is true when no check failed (skipped checks are listed in
	// Skipped and never counted as passed).
	Passed  bool     `json:"passed"`
	Skipped []string `json:"skipped"`
	// Agents lists the Agents checked; NotRunning those left out.
	Agents     []string `json:"agents"`
	NotRunning []string `json:"notRunning"`
}

// Counts returns how many checks passed, were skipped and failed.
func (r Report) Counts() (passed, skipped, failed int) {
	for _, c := range r.Checks {
		switch c.Result {
		case kube.CheckPassed:
			passed++
		case kube.CheckSkipped:
			skipped++
		default:
			failed++
		}
	}
	return
}

// Doctor makes every routing check: the installation's objects, each
// running Agent's route, label and policy, the probes through the route
// (no key, a wrong key and a spoofed identity must be refused before the
// native gateway) and a file read through OCC.
func Doctor(ctx context.Context, o DoctorOptions) (Report, error) {
	for _, s := range o.Skip {
		if !slices.Contains(CheckNames, s) {
			return Report{}, fmt.Errorf("--skip %s: unknown check; the checks are %s", s, strings.Join(CheckNames, ", "))
		}
	}
	if o.File == "" {
		o.File = "SOUL.md"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	rep := Report{Agents: []string{}, NotRunning: []string{}, Skipped: []string{}}
	rep.Checks = append(rep.Checks, o.Cluster.CheckInstallationRouting(ctx)...)
	cfg := o.Cluster.Config()
	var probe *prober
	var probeErr error
	if cfg.GatewayRouting != nil && o.RouteAddress != "" {
		probe, probeErr = newProber(cfg, o.RouteAddress, o.CAFile, o.Timeout)
	}
	for _, ns := range o.Namespaces {
		agents, err := o.API.ListAgents(ctx, ns.ID)
		if err != nil {
			return Report{}, err
		}
		for _, a := range agents {
			label := ns.Name + "/" + a.Name
			if a.ActiveRevisionID == "" || a.DesiredRuntimeState != apitypes.RuntimeRunning || a.Status != apitypes.AgentActive {
				rep.NotRunning = append(rep.NotRunning, label)
				continue
			}
			rep.Agents = append(rep.Agents, label)
			rep.Checks = append(rep.Checks, o.Cluster.CheckAgentRouting(ctx, ns.ID, a.ID)...)
			if cfg.GatewayRouting != nil {
				rep.Checks = append(rep.Checks, probeChecks(ctx, probe, probeErr, o, ns.ID, a.ID)...)
			}
			obj := "Agent " + label + " " + o.File
			if f, err := o.API.GetFile(ctx, ns.ID, a.ID, o.File); err != nil {
				rep.Checks = append(rep.Checks, kube.Check{Name: CheckFileRead, Object: obj, Result: kube.CheckFailed,
					Detail: "the read through OCC failed: " + err.Error(),
					Remedy: "503 DEPENDENCY_UNAVAILABLE: check the CA file, the service key and the route; see the other checks"})
			} else {
				rep.Checks = append(rep.Checks, kube.Check{Name: CheckFileRead, Object: obj, Result: kube.CheckPassed,
					Detail: fmt.Sprintf("read through OCC: %d bytes, hash %s", len(f.Content), f.Hash)})
			}
		}
	}
	rep.Passed = true
	for i := range rep.Checks {
		c := &rep.Checks[i]
		if slices.Contains(o.Skip, c.Name) || (slices.Contains(o.Skip, SkipProbes) && strings.HasPrefix(c.Name, "probe-")) {
			c.Detail = "not checked here (--skip " + c.Name + "); it saw: " + c.Result + ": " + c.Detail
			c.Result, c.Remedy = kube.CheckSkipped, ""
			if !slices.Contains(rep.Skipped, c.Name) {
				rep.Skipped = append(rep.Skipped, c.Name)
			}
			continue
		}
		if c.Result != kube.CheckPassed {
			rep.Passed = false
		}
	}
	return rep, nil
}

func probeChecks(ctx context.Context, p *prober, perr error, o DoctorOptions, nsID, agentID string) []kube.Check {
	obj := "route " + kube.AgentPath(nsID, agentID)
	names := []string{CheckProbeNoKey, CheckProbeWrongKey, CheckProbeSpoofIdentity}
	if p == nil {
		detail, remedy := "no --route-address given", "give --route-address HOST:PORT where the listener is reached (kubectl -n ENVOY_NAMESPACE port-forward service/ENVOY_SERVICE 8443:443) or --skip probes"
		if perr != nil {
			detail, remedy = perr.Error(), "fix --route-address / --ca-file"
		}
		var out []kube.Check
		for _, n := range names {
			out = append(out, kube.Check{Name: n, Object: obj, Result: kube.CheckFailed, Detail: detail, Remedy: remedy})
		}
		return out
	}
	wrong := make([]byte, 32)
	_, _ = rand.Read(wrong)
	cases := []struct {
		name    string
		headers map[string]string
		what    string
	}{
		{CheckProbeNoKey, nil, "without x-api-key"},
		{CheckProbeWrongKey, map[string]string{"x-api-key": hex.EncodeToString(wrong)}, "with a wrong x-api-key"},
		{CheckProbeSpoofIdentity, map[string]string{
			"x-occ-identity": "occ-workspace-files", "x-openclaw-scopes": "operator.admin",
			"x-forwarded-for": "127.0.0.1", "forwarded": "for=127.0.0.1", "x-real-ip": "127.0.0.1",
		}, "with a spoofed x-occ-identity and forwarding headers, no key"},
	}
	var out []kube.Check
	for _, c := range cases {
		status, err := p.upgrade(ctx, kube.AgentPath(nsID, agentID), c.headers)
		switch {
		case err != nil:
			out = append(out, kube.Check{Name: c.name, Object: obj, Result: kube.CheckFailed, Detail: "the probe failed: " + err.Error(),
				Remedy: "check --route-address, --ca-file and the listener certificate"})
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			out = append(out, kube.Check{Name: c.name, Object: obj, Result: kube.CheckPassed,
				Detail: fmt.Sprintf("a WebSocket upgrade %s was refused with HTTP %d", c.what, status)})
		case status == http.StatusSwitchingProtocols:
			out = append(out, kube.Check{Name: c.name, Object: obj, Result: kube.CheckFailed,
				Detail: "a WebSocket upgrade " + c.what + " reached the native gateway (HTTP 101)",
				Remedy: "the SecurityPolicy is not enforced on this route: kubectl describe securitypolicy; do not use the route until fixed"})
		default:
			out = append(out, kube.Check{Name: c.name, Object: obj, Result: kube.CheckFailed,
				Detail: fmt.Sprintf("a WebSocket upgrade %s answered HTTP %d, not 401", c.what, status),
				Remedy: "404: the route or hostname does not match (see route-accepted); 5xx: the proxy has no healthy backend"})
		}
	}
	return out
}

// prober sends WebSocket upgrade requests for the routed host to a fixed
// address, with TLS verified for the routed host.
type prober struct {
	host    string
	hc      *http.Client
	timeout time.Duration
}

func newProber(cfg kube.Config, address, caFile string, timeout time.Duration) (*prober, error) {
	if _, _, err := net.SplitHostPort(address); err != nil {
		return nil, fmt.Errorf("--route-address %q: %w", address, err)
	}
	r := cfg.WithDefaults().GatewayRouting
	tc := &tls.Config{ServerName: r.Host(), MinVersion: tls.VersionTLS12}
	if caFile != "" {
		// Read as OCC reads its own CA bundle: a regular file, at most
		// 1 MiB (secretfile).
		abs, err := filepath.Abs(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pem, err := secretfile.ReadCABundle(abs)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		TLSClientConfig:   tc,
		ForceAttemptHTTP2: false,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, address)
		},
		DisableKeepAlives: true,
	}
	host := r.Host()
	if r.EndpointPort != 443 {
		host = net.JoinHostPort(host, fmt.Sprint(r.EndpointPort))
	}
	return &prober{host: host, timeout: timeout, hc: &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

func (p *prober) upgrade(ctx context.Context, path string, headers map[string]string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	u := url.URL{Scheme: "https", Host: p.host, Path: path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(nonce))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return 0, ue.Err
		}
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

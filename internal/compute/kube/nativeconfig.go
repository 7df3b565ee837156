package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/openclaw/occ/internal/compute/nativeconfig"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/setuprunner"
)

// passwordRef is the one accepted form of gateway.auth.password: an
// environment SecretRef, never a literal (the document lands in a
// ConfigMap).
var passwordRef = map[string]any{"source": "env", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD"}

// RenderNativeConfig returns the native openclaw.json of a revision: the
// tenant's Configuration document with what OCC controls set. What OCC
// controls wins; a document that sets one of those keys to something else
// fails the deployment with a permanent CONFIGURATION_INVALID (a tenant
// cannot loosen the gateway's authentication, bind, port or workspace).
// Explicit settings that match what OCC renders are accepted. Messages name
// keys, never values: a configuration may carry secrets.
//
// OCC sets gateway.mode "local", gateway.bind "lan" (Envoy connects from
// its own Pod), gateway.port = network.gatewayPort and
// agents.defaults.workspace. With routing it also renders trusted-proxy
// authentication (openclaw-gateway.md Appendix B):
//
//	gateway.trustedProxies      = network.gatewayTrustedProxyCidrs
//	gateway.allowRealIpFallback = true (OCC's Pod address arrives as X-Real-IP)
//	gateway.auth = {mode: "trusted-proxy",
//	  trustedProxy: {userHeader: "x-occ-identity", allowUsers: ["occ-workspace-files"]},
//	  identityScopes: {"occ-workspace-files": [operator.admin, operator.read, operator.write]}}
//
// and accepts only an environment SecretRef as gateway.auth.password (for
// operator loopback access). Without routing the tenant's authentication
// passes through, except a literal token or password, which would be
// stored in a ConfigMap.
//
// The native main-agent constraint applies (setuprunner.MainAgentSupported):
// the workspace the driver mounts and seeds is the main agent's.
func RenderNativeConfig(cfg Config, raw json.RawMessage) ([]byte, error) {
	cfg = cfg.WithDefaults()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := nativeconfig.Decode(raw)
	if err != nil {
		return nil, err
	}
	if err := setuprunner.MainAgentSupported(raw); err != nil {
		return nil, invalidConfig("only the native main agent is supported: %v", err)
	}
	if err := checkConflicts(cfg, doc); err != nil {
		return nil, err
	}

	gateway := nativeconfig.Child(doc, "gateway")
	gateway["mode"] = "local"
	gateway["bind"] = "lan"
	gateway["port"] = cfg.Network.GatewayPort
	if cfg.GatewayRouting != nil {
		gateway["trustedProxies"] = slices.Clone(cfg.Network.GatewayTrustedProxyCIDRs)
		gateway["allowRealIpFallback"] = true
		auth := nativeconfig.Child(gateway, "auth")
		auth["mode"] = "trusted-proxy"
		auth["trustedProxy"] = map[string]any{
			"userHeader": IdentityHeader,
			"allowUsers": []string{Identity},
		}
		auth["identityScopes"] = map[string]any{Identity: IdentityScopes()}
	}
	nativeconfig.Child(nativeconfig.Child(doc, "agents"), "defaults")["workspace"] = WorkspaceDir

	out, err := nativeconfig.Encode(doc)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	return out, nil
}

// checkConflicts refuses documents that set what OCC controls to
// something else.
func checkConflicts(cfg Config, doc map[string]any) error {
	gateway, err := nativeconfig.Object(doc, "gateway", "gateway")
	if err != nil {
		return err
	}
	if err := want(gateway, "gateway.mode", "mode", "local"); err != nil {
		return err
	}
	if err := want(gateway, "gateway.bind", "bind", "lan"); err != nil {
		return err
	}
	if err := want(gateway, "gateway.port", "port", json.Number(strconv.Itoa(cfg.Network.GatewayPort))); err != nil {
		return err
	}
	if _, ok := gateway["customBindHost"]; ok {
		return invalidConfig("gateway.customBindHost is not allowed: the Kubernetes driver owns the gateway's listener")
	}
	tailscale, err := nativeconfig.Object(gateway, "tailscale", "gateway.tailscale")
	if err != nil {
		return err
	}
	if err := want(tailscale, "gateway.tailscale.mode", "mode", "off"); err != nil {
		return err
	}
	auth, err := nativeconfig.Object(gateway, "auth", "gateway.auth")
	if err != nil {
		return err
	}
	if pw, ok := auth["password"]; ok && !jsonEqual(pw, passwordRef) {
		return invalidConfig(`gateway.auth.password must be the SecretRef {"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}: a literal would be stored in a ConfigMap`)
	}
	if _, ok := auth["token"]; ok {
		return invalidConfig("gateway.auth.token is not allowed: a literal would be stored in a ConfigMap, and routed gateways use trusted-proxy authentication")
	}
	if cfg.GatewayRouting == nil {
		return checkWorkspace(doc)
	}

	// Routed: the authentication is OCC's.
	for k := range auth {
		switch k {
		case "mode", "trustedProxy", "identityScopes", "password":
		default:
			return invalidConfig("gateway.auth.%s is not supported with routing: the driver renders trusted-proxy authentication", k)
		}
	}
	if err := want(auth, "gateway.auth.mode", "mode", "trusted-proxy"); err != nil {
		return err
	}
	if v, ok := auth["trustedProxy"]; ok {
		tp, isObj := v.(map[string]any)
		if !isObj {
			return invalidConfig("gateway.auth.trustedProxy must be an object")
		}
		for k, v := range tp {
			switch k {
			case "userHeader":
				if !jsonEqual(v, IdentityHeader) {
					return invalidConfig("gateway.auth.trustedProxy.userHeader must be absent or %q", IdentityHeader)
				}
			case "allowUsers":
				if !jsonEqual(v, []any{Identity}) {
					return invalidConfig("gateway.auth.trustedProxy.allowUsers must be absent or [%q]", Identity)
				}
			case "allowLoopback":
				// A loopback client could present the identity header
				// itself; only Envoy may.
				if !jsonEqual(v, false) {
					return invalidConfig("gateway.auth.trustedProxy.allowLoopback must be absent or false")
				}
			default:
				return invalidConfig("gateway.auth.trustedProxy.%s is not supported with routing", k)
			}
		}
	}
	if v, ok := auth["identityScopes"]; ok {
		scopes := make([]any, 0, 3)
		for _, s := range IdentityScopes() {
			scopes = append(scopes, s)
		}
		if !sameScopes(v, scopes) {
			return invalidConfig("gateway.auth.identityScopes must be absent or grant %q exactly %v", Identity, IdentityScopes())
		}
	}
	if v, ok := gateway["trustedProxies"]; ok {
		list, isList := v.([]any)
		if !isList || !sameStrings(list, cfg.Network.GatewayTrustedProxyCIDRs) {
			return invalidConfig("gateway.trustedProxies must be absent or equal network.gatewayTrustedProxyCidrs of the installation")
		}
	}
	if err := want(gateway, "gateway.allowRealIpFallback", "allowRealIpFallback", true); err != nil {
		return err
	}
	return checkWorkspace(doc)
}

// checkWorkspace accepts only the workspace the driver mounts.
func checkWorkspace(doc map[string]any) error {
	agents, err := nativeconfig.Object(doc, "agents", "agents")
	if err != nil {
		return err
	}
	defaults, err := nativeconfig.Object(agents, "defaults", "agents.defaults")
	if err != nil {
		return err
	}
	if err := want(defaults, "agents.defaults.workspace", "workspace", WorkspaceDir); err != nil {
		return err
	}
	entries, err := nativeconfig.Object(agents, "entries", "agents.entries")
	if err != nil {
		return err
	}
	if main, ok := entries["main"].(map[string]any); ok {
		if err := want(main, "agents.entries.main.workspace", "workspace", WorkspaceDir); err != nil {
			return err
		}
	}
	return nil
}

// want accepts an absent key or the one value OCC sets.
func want(obj map[string]any, name, key string, value any) error {
	v, ok := obj[key]
	if !ok || jsonEqual(v, value) {
		return nil
	}
	return invalidConfig("%s must be absent or %s on the Kubernetes driver", name, jsonText(value))
}

// sameScopes compares {Identity: [...]} with want as sets.
func sameScopes(v any, scopes []any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	list, ok := m[Identity].([]any)
	if !ok {
		return false
	}
	strs := make([]string, 0, len(scopes))
	for _, s := range scopes {
		strs = append(strs, s.(string))
	}
	return sameStrings(list, strs)
}

// sameStrings compares a JSON list with strings as sets.
func sameStrings(list []any, want []string) bool {
	got := make([]string, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return false
		}
		got = append(got, s)
	}
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// jsonEqual compares a decoded JSON value (numbers as json.Number) with a
// Go value by their JSON encodings.
func jsonEqual(got, want any) bool {
	a, err1 := json.Marshal(got)
	b, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func invalidConfig(format string, args ...any) error {
	return compute.Permanent(compute.CodeConfigurationInvalid, fmt.Errorf("kube: "+format, args...))
}

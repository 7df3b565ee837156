// Package kube owns the Kubernetes Compute driver: each Agent's OpenClaw
// gateway runs as a one-replica Deployment in a tenant namespace per OCC
// Namespace, and OCC reaches it for live workspace files through the
// installation's private Envoy Gateway (an HTTPRoute per Agent on one
// shared hostname, authenticated by the service key in x-api-key).
//
// # What it creates
//
// Per OCC Namespace (EnsureNamespace): the namespace occ-<sha256(nsId)[:24]>
// with the labels app.kubernetes.io/managed-by=openclaw-enterprise,
// openclaw.dev/namespace=<nsId> and, with routing, the route-attachment
// label openclaw-enterprise.io/gateway=<routeLabel>; the restricted Pod
// Security Standard; NetworkPolicies default-deny, allow-dns,
// allow-gateway-ingress (only the Envoy Pods of the Gateway, on the
// gateway port) and allow-model-egress (TCP 443 outside private ranges).
// With runtime.imagePullSecrets, PrepareRevision also copies each of those
// registry-credential Secrets into the namespace as image-pull-<name>
// (refreshed on every prepare; a missing or non-registry source fails the
// prepare, and no gateway is deployed without them), and the gateway Pods
// list the copies as their imagePullSecrets.
//
// Per Agent, with <a> = sha256(agentId)[:12] and <r> = sha256(revisionId)[:12]:
//
//	ConfigMap  gateway-<a>-rev-<r>   immutable, key openclaw.json: the native config (one per revision)
//	PVC        gateway-state-<a>     the workspace and state, created once, never changed
//	Secret     workspace-setup-<a>   payload.json / identity.json, mounted as files only
//	Deployment gateway-<a>           1 replica, Recreate; runs one revision's template
//	Service    gateway-<a>           the gateway port
//	HTTPRoute  gateway-<a>           exact /namespaces/<ns>/agents/<agent> → rewrite to /
//
// Render, RenderNamespace and RenderTenantAccess are pure functions from
// (configuration, revision, setup); the Driver applies their output with
// server-side apply under one field manager, "occ", except that an object
// its read found absent is created with a plain create (create), so one
// of that name made by someone else in between is judged, never adopted.
// The installation-level
// routing the routes attach to (the Gateway, its EnvoyProxy and API-key
// SecurityPolicy, the certificates) is the Helm chart's, deploy/helm/occ:
// it derives the Gateway's hostname and route-attachment label from the
// same inputs as kubecfg, and internal/chart proves that they agree.
//
// # Ownership and failure semantics
//
// The Deployment, Service and HTTPRoute are shared by an Agent's
// revisions; the annotation openclaw.dev/agent-revision-id (with the
// revision number in openclaw.dev/agent-revision) says which revision owns
// each. Prepare takes the Deployment for its revision, Activate takes the
// Service and route; neither ever takes an object from a newer revision
// (that is a permanent RUNTIME_FAILED: the revision is stale). Every
// take-over is conditional on the resourceVersion the ownership was read
// at, and every delete carries UID and resourceVersion preconditions, so
// an object that was replaced or re-owned in between is never removed
// (the server answers 409, the driver reads again). Stop and Retire remove
// routing only while their revision owns it; when their revision owns the
// Deployment while another revision still serves, the Deployment is
// handed back to the serving revision instead of being stopped, so an
// abandoned deployment falls back to what served before.
//
// A Configuration that conflicts with what the driver renders (another
// auth mode, a token, other trusted proxies, bind, port, workspace, agents
// other than main) fails with a permanent CONFIGURATION_INVALID; a
// workspace-setup init container that fails Options.SetupFailureLimit
// times fails with WORKSPACE_SETUP_FAILED. An API server that cannot
// answer makes PrepareRevision pending (KUBERNETES_API_UNAVAILABLE), never
// failed; every API request has its own deadline (Options.CallTimeout)
// inside the caller's.
//
// # Workspace setup
//
// With a setup, the Pod's first init container copies occ from the OCC
// image into an emptyDir, the second runs `occ workspace-setup` in the
// gateway image over the PVC's workspace with the Secret's payload file,
// and the gateway container starts through `occ workspace-setup --verify`
// against identity.json, so a workspace whose marker is missing or
// different never serves. Activation replaces the payload with the
// completed identity, whatever the gateway's state at that moment, and a
// retried prepare of the same setup keeps it so: the file contents leave
// the cluster before the worker records the activation.
package kube

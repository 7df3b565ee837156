// Package routingops carries out the operator's two routing procedures
// (seed 003, "Enable routing for existing Namespaces and Agents" and
// "Verify routing and file access") for the client commands occ routing
// enable and occ doctor routing: backups, Namespace reconciliation and
// Agent redeployment through the OCC API, progress kept in the backup
// directory so that a second run resumes, and the routing checks and
// probes with their remedies.
//
// The OCC API holds no Kubernetes permission, so what must be read from
// the cluster (the driver's plan and checks, the namespace backup) is read
// with the operator's own kubeconfig through the Kubernetes driver
// (Cluster, implemented by *kube.Driver); every change goes through the
// API (client.Client), audited like any other.
//
// Failures are errors naming the object and what to do; an error of an
// API call keeps its *client.Error for the command's exit code.
package routingops

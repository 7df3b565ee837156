package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/routingops"
)

// The routing commands: occ routing enable and occ doctor routing
// (docs/install-kubernetes.md). They are thin: flags, the Namespaces in
// scope, then package routingops, which reads the cluster with the
// operator's kubeconfig and changes things only through the API.

// clusterFlags say where the driver configuration and the cluster are.
type clusterFlags struct {
	src routingops.Source
}

func addClusterFlags(cmd *cobra.Command, cf *clusterFlags) {
	fs := cmd.Flags()
	fs.StringVar(&cf.src.Kubeconfig, "kubeconfig", "", "your kubeconfig file (required: the OCC API holds no Kubernetes permission)")
	fs.StringVar(&cf.src.Context, "kube-context", "", "a context of --kubeconfig; default its current one")
	fs.StringVar(&cf.src.File, "config", "", "the occ configuration file the server runs with; default: the Helm chart's ConfigMap")
	fs.StringVar(&cf.src.Release, "release", "oce", "the Helm release whose ConfigMap <release>-occ-config holds occ.yaml")
	fs.StringVar(&cf.src.ReleaseNamespace, "release-namespace", "openclaw-system", "the Helm release's namespace")
}

func (cf *clusterFlags) open(ctx context.Context) (*kube.Driver, error) {
	cfg, err := routingops.DriverConfig(ctx, cf.src)
	if err != nil {
		return nil, usageError(err)
	}
	d, err := routingops.OpenCluster(cfg)
	if err != nil {
		return nil, runtimeError(err)
	}
	return d, nil
}

// scopeNamespaces is --namespace (one, name or id) or --all (every ready
// Namespace the caller may read).
func scopeNamespaces(ctx context.Context, c *client.Client, ns string, all bool) ([]apitypes.Namespace, error) {
	list, err := c.ListNamespaces(ctx)
	if err != nil {
		return nil, apiError(err)
	}
	if all {
		var out []apitypes.Namespace
		for _, n := range list {
			if n.Status == apitypes.NamespaceReady {
				out = append(out, n)
			}
		}
		return out, nil
	}
	id, err := resolveNamespace(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	n, err := c.GetNamespace(ctx, id)
	if err != nil {
		return nil, apiError(err)
	}
	if n.Status != apitypes.NamespaceReady {
		return nil, &exitError{code: exitConflict, err: fmt.Errorf("the Namespace %s is %s, not ready", n.Name, n.Status)}
	}
	return []apitypes.Namespace{n}, nil
}

// opError gives an error of routingops its exit code: an API error's
// class, a refusal 1.
func opError(err error) error {
	var ce *client.Error
	var ee *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return err
	case errors.As(err, &ce):
		return &exitError{code: codeForAPIError(ce), err: fmt.Errorf("%v [%s]", err, ce.Code)}
	}
	return runtimeError(err)
}

func newRoutingCmd(d deps) *cobra.Command {
	cmd := groupCmd(d, "routing", "Turn private Envoy Gateway routing on for existing Namespaces and Agents",
		"  occ routing enable --all --backup-dir ./routing-backup --kubeconfig ~/.kube/prod")
	f := &clientFlags{}
	addClientFlags(cmd, f, true)
	var cf clusterFlags
	var all, dryRun bool
	var backupDir string
	var timeout, interval time.Duration
	enable := &cobra.Command{
		Use:   "enable (--namespace NS | --all) --backup-dir DIR --kubeconfig FILE",
		Short: "Back up, reconcile each Namespace and redeploy each Agent so routing applies (administrators)",
		Long: `After routing was configured (chart values, driver configuration, API and
worker restarted), bring existing Namespaces and Agents onto it:

  1. plan every Namespace with your kubeconfig: a tenant namespace that is
     not OCC's, a changed gateway Pod selector or a NetworkPolicy that
     admits other callers stops the command before anything changed;
  2. back up into --backup-dir (0700, files 0600): the tenant namespace and
     its NetworkPolicies, each Agent with its active revision (the native
     configuration it runs) and its Configuration;
  3. reconcile the Namespace through the API (the worker adds the route
     label and the Envoy-only ingress policy) and wait;
  4. redeploy each running Agent (a new revision of the same Agent: same
     id, same PVC) and follow the deployment;
  5. wait until each Agent's HTTPRoute is accepted.

Progress is kept in the backup directory: run the same command again after
an interruption and it continues, without redoing finished Agents.
--dry-run prints the plan and the exact changes and changes nothing.`,
		Example: "  occ routing enable --namespace team-a --backup-dir ./routing-backup --kubeconfig ~/.kube/prod --dry-run\n" +
			"  occ routing enable --all --backup-dir ./routing-backup --kubeconfig ~/.kube/prod",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			if all == (f.namespace != "") {
				return usageError(errors.New("give --namespace NS or --all"))
			}
			if backupDir == "" {
				return usageError(errors.New("--backup-dir is required"))
			}
			ctx := cmd.Context()
			drv, err := cf.open(ctx)
			if err != nil {
				return err
			}
			nss, err := scopeNamespaces(ctx, cn.c, f.namespace, all)
			if err != nil {
				return err
			}
			return opError(routingops.Enable(ctx, routingops.EnableOptions{
				API: cn.c, Cluster: drv, Namespaces: nss, BackupDir: backupDir, DryRun: dryRun,
				Out: cn.d.stdout, Log: cn.d.stderr, Interval: interval, Timeout: timeout,
			}))
		}),
	}
	addClusterFlags(enable, &cf)
	enable.Flags().BoolVar(&all, "all", false, "every ready Namespace")
	enable.Flags().StringVar(&backupDir, "backup-dir", "", "where the backups and the progress go (created 0700)")
	enable.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and the exact changes; change nothing")
	enable.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for each reconciliation, deployment and route")
	enable.Flags().DurationVar(&interval, "interval", time.Second, "how often to poll")
	cmd.AddCommand(enable)
	return cmd
}

var checkCols = []column[kube.Check]{
	{"CHECK", func(c kube.Check) string { return c.Name }},
	{"OBJECT", func(c kube.Check) string { return c.Object }},
	{"RESULT", func(c kube.Check) string { return c.Result }},
	{"DETAIL", func(c kube.Check) string { return c.Detail }},
	{"REMEDY", func(c kube.Check) string { return c.Remedy }},
}

func newDoctorCmd(d deps) *cobra.Command {
	cmd := groupCmd(d, "doctor", "Check an installation", "  occ doctor routing --kubeconfig ~/.kube/prod --route-address 127.0.0.1:8443")
	f := &clientFlags{}
	addClientFlags(cmd, f, true)
	var cf clusterFlags
	var o routingops.DoctorOptions
	routing := &cobra.Command{
		Use:   "routing --kubeconfig FILE",
		Short: "Check the private routing and probe it; exit 0 only when no check failed",
		Long: `Check the installation's routing and each running Agent's (every ready
Namespace, or --namespace): the Gateway Accepted and Programmed, the listener
Certificate Ready and covering the routed host, the SecurityPolicy Accepted,
each Agent's HTTPRoute Accepted with ResolvedRefs, its tenant namespace label
and allow-gateway-ingress policy. Then probe through the route at
--route-address (for example a kubectl port-forward to the Envoy Service): a
WebSocket upgrade without the key, with a wrong key and with a spoofed
identity header must be refused; and read a file of each Agent through OCC.

Each failure has a remedy. A check this environment cannot make (Programmed
where no Envoy data plane runs) is named with --skip: it is still made and
shown as "skipped" with what it saw, never as passed. The exit status is 0
only when no check failed, 1 otherwise.`,
		Example: "  occ doctor routing --kubeconfig ~/.kube/prod --route-address 127.0.0.1:8443 --ca-file gateway-ca.crt\n" +
			"  occ doctor routing --kubeconfig ~/.kube/prod --skip probes --output json",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			ctx := cmd.Context()
			drv, err := cf.open(ctx)
			if err != nil {
				return err
			}
			nss, err := scopeNamespaces(ctx, cn.c, f.namespace, f.namespace == "")
			if err != nil {
				return err
			}
			o.API, o.Cluster, o.Namespaces = cn.c, drv, nss
			rep, err := routingops.Doctor(ctx, o)
			if err != nil {
				return opError(err)
			}
			if cn.out.format == "table" {
				if err := printTable(cn.out.w, rep.Checks, checkCols); err != nil {
					return err
				}
			} else if err := cn.out.printValue(rep); err != nil {
				return err
			}
			p, s, fl := rep.Counts()
			cn.info("%d passed, %d skipped, %d failed; Agents checked: %d, not running (not checked): %d", p, s, fl, len(rep.Agents), len(rep.NotRunning))
			if len(rep.Skipped) > 0 {
				cn.info("not checked here: %v", rep.Skipped)
			}
			if !rep.Passed {
				return &exitError{code: exitRuntime, err: fmt.Errorf("%d routing checks failed; see REMEDY", fl)}
			}
			return nil
		}),
	}
	addClusterFlags(routing, &cf)
	routing.Flags().StringSliceVar(&o.Skip, "skip", nil, "checks this environment cannot make (shown as skipped); \"probes\" for the three probes")
	routing.Flags().StringVar(&o.RouteAddress, "route-address", "", "HOST:PORT where the Gateway's HTTPS listener is reached from here")
	routing.Flags().StringVar(&o.CAFile, "ca-file", "", "PEM bundle that verifies the listener certificate; default system roots")
	routing.Flags().StringVar(&o.File, "file", "SOUL.md", "the workspace file read through OCC")
	routing.Flags().DurationVar(&o.Timeout, "probe-timeout", 10*time.Second, "bound of each probe")
	cmd.AddCommand(routing)
	return cmd
}

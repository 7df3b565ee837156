package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
)

var namespaceCols = []column[apitypes.Namespace]{
	{"ID", func(n apitypes.Namespace) string { return n.ID }},
	{"NAME", func(n apitypes.Namespace) string { return n.Name }},
	{"STATUS", func(n apitypes.Namespace) string { return string(n.Status) }},
	{"CREATED", func(n apitypes.Namespace) string { return timeCell(n.CreatedAt) }},
}

func newNamespaceCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "namespace", "List, create, show and delete Namespaces",
		"  occ namespace list\n  occ namespace create team-a\n  occ namespace delete team-a")
	cmd.Aliases = []string{"ns"}
	addClientFlags(cmd, f, false)
	pf := &pageFlags{}
	list := &cobra.Command{
		Use: "list", Short: "List the Namespaces you may read (every page, or one with --limit/--cursor)", Args: cobra.NoArgs,
		Example: "  occ namespace list\n  occ namespace list --output json\n  occ namespace list --limit 100",
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			return listCmd(cmd.Context(), d.stderr, cn.out, pf, namespaceCols, cn.c.ListNamespaces,
				func(ctx context.Context, q apitypes.ListQuery) ([]apitypes.Namespace, string, error) {
					l, err := cn.c.ListNamespacesPage(ctx, q)
					return l.Items, l.NextCursor, err
				})
		}),
	}
	addPageFlags(list, pf)
	cmd.AddCommand(
		list,
		&cobra.Command{
			Use: "create NAME", Short: "Create a Namespace (a DNS label)", Args: cobra.ExactArgs(1),
			Example: "  occ namespace create team-a",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				n, err := cn.c.CreateNamespace(cmd.Context(), apitypes.CreateNamespaceRequest{Name: args[0]})
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, n, namespaceCols)
			}),
		},
		&cobra.Command{
			Use: "get NAMESPACE", Short: "Show a Namespace (name or id)", Args: cobra.ExactArgs(1),
			Example: "  occ namespace get team-a --output yaml",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				id, err := resolveNamespace(cmd.Context(), cn.c, args[0])
				if err != nil {
					return err
				}
				n, err := cn.c.GetNamespace(cmd.Context(), id)
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, n, namespaceCols)
			}),
		},
		newNamespaceReconcileCmd(d, f),
		&cobra.Command{
			Use: "delete NAMESPACE", Short: "Delete an empty Namespace (name or id); the worker finishes it", Args: cobra.ExactArgs(1),
			Example: "  occ namespace delete team-a",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				id, err := resolveNamespace(cmd.Context(), cn.c, args[0])
				if err != nil {
					return err
				}
				n, err := cn.c.DeleteNamespace(cmd.Context(), id)
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, n, namespaceCols)
			}),
		},
	)
	return cmd
}

var reconciliationCols = []column[apitypes.Reconciliation]{
	{"ID", func(r apitypes.Reconciliation) string { return r.ID }},
	{"NAMESPACE", func(r apitypes.Reconciliation) string { return r.NamespaceID }},
	{"STATUS", func(r apitypes.Reconciliation) string { return string(r.Status) }},
	{"ERROR", func(r apitypes.Reconciliation) string {
		if r.Error == nil {
			return ""
		}
		return r.Error.Code + ": " + r.Error.Message
	}},
}

// newNamespaceReconcileCmd is "occ namespace reconcile": the
// administrator's request that the worker bring ready Namespaces in line
// with the current installation configuration.
func newNamespaceReconcileCmd(d deps, f *clientFlags) *cobra.Command {
	var all, wait bool
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "reconcile NAMESPACE | --all",
		Short: "Reconcile ready Namespaces against the current installation configuration (administrators)",
		Long: `Queue a reconciliation of a ready Namespace (name or id), or with --all of
every ready Namespace: the worker brings its backend objects in line with the
current installation configuration (for Kubernetes: the route-attachment
label and the Envoy-only ingress policy after routing was turned on). A
refusal (a namespace that is not OCC's, a changed gateway Pod selector, a
NetworkPolicy that admits other callers) changes nothing and names the
object. With --wait, follow each until it succeeds or fails; any failure
exits 1, --timeout exits 7, and so does a poll the server does not answer
within 30s.`,
		Example: "  occ namespace reconcile team-a --wait\n  occ namespace reconcile --all --wait",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) && len(args) <= 1 {
				return usageError(errors.New("name one Namespace or give --all"))
			}
			return cobra.MaximumNArgs(1)(cmd, args)
		},
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ctx := cmd.Context()
			var rs []apitypes.Reconciliation
			if all {
				var err error
				if rs, err = cn.c.ReconcileAllNamespaces(ctx); err != nil {
					return apiError(err)
				}
			} else {
				id, err := resolveNamespace(ctx, cn.c, args[0])
				if err != nil {
					return err
				}
				r, err := cn.c.ReconcileNamespace(ctx, id)
				if err != nil {
					return apiError(err)
				}
				rs = []apitypes.Reconciliation{r}
			}
			if wait {
				wctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				for i, r := range rs {
					cn.info("reconciliation %s of %s queued", r.ID, r.NamespaceID)
					got, err := cn.c.WaitForReconciliation(wctx, r.NamespaceID, r.ID, interval)
					if err != nil {
						// As in agent deploy --wait: a poll that got no
						// answer is the server's silence, not a slow
						// reconciliation.
						if errors.Is(err, client.ErrPollTimeout) {
							return &exitError{code: exitUnreachable, err: fmt.Errorf(
								"the server did not answer a poll of reconciliation %s within %s; its state is unknown, "+
									"it may still be running on the server", r.ID, cn.d.clientTimeout())}
						}
						if wctx.Err() != nil && ctx.Err() == nil {
							return &exitError{code: exitUnreachable, err: fmt.Errorf(
								"reconciliation %s did not finish within %s; it continues on the server", r.ID, timeout)}
						}
						return apiError(err)
					}
					rs[i] = got
				}
			}
			if err := printList(cn.out, rs, reconciliationCols); err != nil {
				return err
			}
			for _, r := range rs {
				if r.Status == apitypes.DeploymentFailed {
					msg := "reconciliation " + r.ID + " of " + r.NamespaceID + " failed"
					if r.Error != nil {
						msg += ": " + r.Error.Code + ": " + r.Error.Message
					}
					return runtimeError(errors.New(msg))
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "every ready Namespace")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until each reconciliation succeeds or fails")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --wait: how long to wait in all")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with --wait: how often to poll")
	return cmd
}

var configurationCols = []column[apitypes.Configuration]{
	{"ID", func(c apitypes.Configuration) string { return c.ID }},
	{"NAME", func(c apitypes.Configuration) string { return c.Name }},
	{"KIND", func(c apitypes.Configuration) string { return c.Kind }},
	{"GENERATION", func(c apitypes.Configuration) string { return strconv.FormatInt(c.Generation, 10) }},
	{"UPDATED", func(c apitypes.Configuration) string { return timeCell(c.UpdatedAt) }},
}

func newConfigurationCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "configuration", "Manage the native OpenClaw configurations of a Namespace",
		"  occ configuration list -n team-a\n  occ configuration create base -f openclaw.json -n team-a")
	cmd.Aliases = []string{"config", "cfg"}
	addClientFlags(cmd, f, true)
	var createFile, updateFile, rename string
	create := &cobra.Command{
		Use:   "create NAME -f FILE",
		Short: "Create a Configuration from a JSON document (FILE, or - for standard input)",
		Long: `Create a Configuration called NAME in the Namespace from FILE, a native
OpenClaw configuration (a JSON object), which the server validates.`,
		Example: "  occ configuration create base -f openclaw.json -n team-a\n  echo '{}' | occ configuration create empty -f -",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			doc, err := readDocument(d, createFile)
			if err != nil {
				return err
			}
			ns, err := cn.namespaceID(cmd.Context())
			if err != nil {
				return err
			}
			c, err := cn.c.CreateConfiguration(cmd.Context(), ns, apitypes.CreateConfigurationRequest{
				Name: args[0], Kind: apitypes.ConfigurationKindAgent, Document: doc})
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, c, configurationCols)
		}),
	}
	create.Flags().StringVarP(&createFile, "file", "f", "", "the JSON document (- for standard input)")
	_ = create.MarkFlagRequired("file")
	update := &cobra.Command{
		Use:   "update CONFIGURATION [-f FILE] [--name NEW]",
		Short: "Replace a Configuration's document and/or rename it (its generation grows)",
		Example: "  occ configuration update base -f openclaw.json -n team-a\n" +
			"  occ configuration update base --name base-v2",
		Args: cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			var in apitypes.PatchConfigurationRequest
			if updateFile != "" {
				doc, err := readDocument(d, updateFile)
				if err != nil {
					return err
				}
				in.Document = doc
			}
			if cmd.Flags().Changed("name") {
				in.Name = &rename
			}
			if in.Document == nil && in.Name == nil {
				return usageError(errors.New("nothing to change: pass -f FILE and/or --name NEW"))
			}
			ns, id, err := cn.configurationArg(cmd, args[0])
			if err != nil {
				return err
			}
			c, err := cn.c.PatchConfiguration(cmd.Context(), ns, id, in)
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, c, configurationCols)
		}),
	}
	update.Flags().StringVarP(&updateFile, "file", "f", "", "the new JSON document (- for standard input)")
	update.Flags().StringVar(&rename, "name", "", "the new name")
	pf := &pageFlags{}
	list := &cobra.Command{
		Use: "list", Short: "List the Configurations of the Namespace (every page, or one with --limit/--cursor)", Args: cobra.NoArgs,
		Example: "  occ configuration list -n team-a --output yaml\n  occ configuration list -n team-a --limit 50",
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			ns, err := cn.namespaceID(cmd.Context())
			if err != nil {
				return err
			}
			return listCmd(cmd.Context(), d.stderr, cn.out, pf, configurationCols,
				func(ctx context.Context) ([]apitypes.Configuration, error) { return cn.c.ListConfigurations(ctx, ns) },
				func(ctx context.Context, q apitypes.ListQuery) ([]apitypes.Configuration, string, error) {
					l, err := cn.c.ListConfigurationsPage(ctx, ns, q)
					return l.Items, l.NextCursor, err
				})
		}),
	}
	addPageFlags(list, pf)
	cmd.AddCommand(
		list,
		create,
		&cobra.Command{
			Use:   "get CONFIGURATION",
			Short: "Show a Configuration (name or id); --output json shows its document",
			Args:  cobra.ExactArgs(1), Example: "  occ configuration get base --output json",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				ns, id, err := cn.configurationArg(cmd, args[0])
				if err != nil {
					return err
				}
				c, err := cn.c.GetConfiguration(cmd.Context(), ns, id)
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, c, configurationCols)
			}),
		},
		update,
		&cobra.Command{
			Use: "delete CONFIGURATION", Short: "Delete a Configuration no Agent uses", Args: cobra.ExactArgs(1),
			Example: "  occ configuration delete base -n team-a",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				ns, id, err := cn.configurationArg(cmd, args[0])
				if err != nil {
					return err
				}
				r, err := cn.c.DeleteConfiguration(cmd.Context(), ns, id)
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, r, deletedCols)
			}),
		},
	)
	return cmd
}

var deletedCols = []column[apitypes.Deleted]{
	{"ID", func(r apitypes.Deleted) string { return r.ID }},
	{"DELETED", func(r apitypes.Deleted) string { return strconv.FormatBool(r.Deleted) }},
}

// configurationArg resolves the Namespace and a Configuration argument.
func (cn *conn) configurationArg(cmd *cobra.Command, arg string) (string, string, error) {
	ns, err := cn.namespaceID(cmd.Context())
	if err != nil {
		return "", "", err
	}
	id, err := resolveConfiguration(cmd.Context(), cn.c, ns, arg)
	return ns, id, err
}

// readDocument reads a JSON document from path ("-": standard input) and
// checks only that it is JSON; the server validates the rest.
func readDocument(d deps, path string) (json.RawMessage, error) {
	b, err := readInput(d, path, "the document", "; a Configuration document holds at most 48 KiB")
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, usageError(fmt.Errorf("%s is not valid JSON", path))
	}
	return json.RawMessage(b), nil
}

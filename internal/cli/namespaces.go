package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
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
	cmd.AddCommand(
		&cobra.Command{
			Use: "list", Short: "List the Namespaces you may read", Args: cobra.NoArgs,
			Example: "  occ namespace list\n  occ namespace list --output json",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
				l, err := cn.c.ListNamespaces(cmd.Context())
				if err != nil {
					return apiError(err)
				}
				return printList(cn.out, l, namespaceCols)
			}),
		},
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
	cmd.AddCommand(
		&cobra.Command{
			Use: "list", Short: "List the Configurations of the Namespace", Args: cobra.NoArgs,
			Example: "  occ configuration list -n team-a --output yaml",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
				ns, err := cn.namespaceID(cmd.Context())
				if err != nil {
					return err
				}
				l, err := cn.c.ListConfigurations(cmd.Context(), ns)
				if err != nil {
					return apiError(err)
				}
				return printList(cn.out, l, configurationCols)
			}),
		},
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
	var b []byte
	var err error
	if path == "-" {
		if d.stdin == nil {
			return nil, usageError(errors.New("no standard input"))
		}
		b, err = io.ReadAll(io.LimitReader(d.stdin, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError(fmt.Errorf("reading the document: %w", err))
	}
	if !json.Valid(b) {
		return nil, usageError(fmt.Errorf("%s is not valid JSON", path))
	}
	return json.RawMessage(b), nil
}

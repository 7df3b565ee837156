package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// addClientCmds adds the client commands, which call an OCC server's API
// through package client with a saved context (docs/cli.md).
func addClientCmds(root *cobra.Command, d deps) {
	root.AddCommand(newLoginCmd(d), newLogoutCmd(d), newContextCmd(d),
		newNamespaceCmd(d), newConfigurationCmd(d), newAgentCmd(d), newFilesCmd(d), newAuditCmd(d),
		newUserCmd(d), newSessionCmd(d), newServicePrincipalCmd(d), newKeyCmd(d), newRoleCmd(d), newBindingCmd(d), newRestrictionCmd(d),
		newRoutingCmd(d), newDoctorCmd(d))
}

// groupCmd is a command that only holds subcommands: run alone it prints
// its help to standard error and exits 2, like `occ` alone.
func groupCmd(d deps, use, short, example string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(d.stderr)
			_ = cmd.Help()
			return usageError(errors.New("missing subcommand"))
		},
	}
}

// run wraps a client command's body: it connects with the shared flags
// and runs fn with the connection.
func withConn(d deps, f *clientFlags, fn func(cmd *cobra.Command, cn *conn, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cn, err := connect(d, f)
		if err != nil {
			return err
		}
		return fn(cmd, cn, args)
	}
}

// info prints a message for people to standard error, so standard output
// stays the command's result.
func (cn *conn) info(format string, a ...any) {
	fmt.Fprintf(cn.d.stderr, format+"\n", a...)
}

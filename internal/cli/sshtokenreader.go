package cli

import (
	"github.com/spf13/cobra"

	computessh "github.com/openclaw/occ/internal/compute/ssh"
)

// newSSHTokenReaderCmd is the SSH driver's host-side token reader: the
// driver starts it over SSH, as root, with the uploaded occ binary, and
// keeps it running for token reads (internal/compute/ssh/tokens.go). It is
// hidden: nobody runs it by hand.
func newSSHTokenReaderCmd(d deps) *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:    "ssh-token-reader --root ROOT",
		Short:  "Answer the SSH driver's gateway token reads on standard input (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := computessh.ServeTokens(d.stdin, d.stdout, root); err != nil {
				return runtimeError(err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "the SSH driver's directory on this host")
	return cmd
}

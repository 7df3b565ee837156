package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasHelp walks the whole command tree: every command a
// user runs has a one-line summary, and every runnable one has examples,
// so `occ <command> --help` always shows how it is used.
func TestEveryCommandHasHelp(t *testing.T) {
	root := newRoot(deps{})
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	count := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			count++
			path := sub.CommandPath()
			if strings.TrimSpace(sub.Short) == "" {
				t.Errorf("%s has no Short description", path)
			}
			// cobra's own completion commands document themselves in Long.
			if sub.Runnable() && strings.TrimSpace(sub.Example) == "" && !strings.HasPrefix(path, "occ completion") {
				t.Errorf("%s has no Example", path)
			}
			walk(sub)
		}
	}
	walk(root)
	if count < 40 {
		t.Fatalf("walked only %d commands; the walk is broken", count)
	}
}

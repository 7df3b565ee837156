package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
)

// pageFlags are the paging flags of the paged list commands. Without them
// a list command follows every page and prints the whole list; with
// either, it prints one page, and the next page's cursor (if any) on
// standard error in table format or as nextCursor in JSON and YAML.
type pageFlags struct {
	limit  int
	cursor string
}

func addPageFlags(cmd *cobra.Command, f *pageFlags) {
	cmd.Flags().IntVar(&f.limit, "limit", 0, "print one page of at most this many items (1-500)")
	cmd.Flags().StringVar(&f.cursor, "cursor", "", "print the page after this cursor (from a previous page)")
}

func (f *pageFlags) paged() bool { return f.limit != 0 || f.cursor != "" }

// listCmd runs a paged list: every page, or the one page the flags ask for.
func listCmd[T any](ctx context.Context, stderr io.Writer, p printer, f *pageFlags, cols []column[T],
	all func(context.Context) ([]T, error), one func(context.Context, apitypes.ListQuery) ([]T, string, error)) error {
	if !f.paged() {
		l, err := all(ctx)
		if err != nil {
			return apiError(err)
		}
		return printList(p, l, cols)
	}
	if f.limit < 0 || f.limit > 500 {
		return usageError(errors.New("--limit must be between 1 and 500"))
	}
	items, next, err := one(ctx, apitypes.ListQuery{Limit: f.limit, Cursor: f.cursor})
	if err != nil {
		return apiError(err)
	}
	if p.format == "table" {
		if err := printTable(p.w, items, cols); err != nil {
			return err
		}
		if next != "" {
			_, err = fmt.Fprintf(stderr, "next page: --cursor %s\n", next)
		}
		return err
	}
	return p.printValue(struct {
		Items      []T    `json:"items"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{items, next})
}

// pagedList is the "list" subcommand of a paged collection without
// arguments: every page, or the one page --limit/--cursor ask for.
func pagedList[T apitypes.Data](d deps, f *clientFlags, short, example string, cols []column[T],
	all func(context.Context, *conn) ([]T, error), one func(context.Context, *conn, apitypes.ListQuery) (apitypes.List[T], error)) *cobra.Command {
	pf := &pageFlags{}
	cmd := &cobra.Command{
		Use: "list", Short: short, Args: cobra.NoArgs, Example: example,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			return listCmd(cmd.Context(), d.stderr, cn.out, pf, cols,
				func(ctx context.Context) ([]T, error) { return all(ctx, cn) },
				func(ctx context.Context, q apitypes.ListQuery) ([]T, string, error) {
					l, err := one(ctx, cn, q)
					return l.Items, l.NextCursor, err
				})
		}),
	}
	addPageFlags(cmd, pf)
	return cmd
}

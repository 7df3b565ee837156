package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// outputFormats are the values of --output.
var outputFormats = []string{"table", "json", "yaml"}

// printer writes a command's result to standard output in the format
// --output chose. json and yaml print the apitypes value itself (a list
// as apitypes.List, {"items": [...]}), so scripts see the API's own
// member names; table is for people and may change between releases.
type printer struct {
	w      io.Writer
	format string
}

func newPrinter(w io.Writer, format string) (printer, error) {
	for _, f := range outputFormats {
		if f == format {
			return printer{w: w, format: format}, nil
		}
	}
	return printer{}, usageError(fmt.Errorf("--output must be one of %s, not %q", strings.Join(outputFormats, ", "), format))
}

// column is one column of a table: its header and how a row shows it.
type column[T any] struct {
	header string
	value  func(T) string
}

// printValue prints v as json or yaml; table is the caller's.
func (p printer) printValue(v any) error {
	switch p.format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return runtimeError(err)
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return writeError(err)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return runtimeError(err)
		}
		_, err = p.w.Write(b)
		return writeError(err)
	}
	return runtimeError(fmt.Errorf("output format %q has no value printer", p.format))
}

// printTable prints rows under cols, aligned.
func printTable[T any](w io.Writer, rows []T, cols []column[T]) error {
	return writeTable(w, true, rows, cols)
}

// printRows prints rows without the header.
func printRows[T any](w io.Writer, rows []T, cols []column[T]) error {
	return writeTable(w, false, rows, cols)
}

func writeTable[T any](w io.Writer, header bool, rows []T, cols []column[T]) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header {
		hs := make([]string, len(cols))
		for i, c := range cols {
			hs[i] = c.header
		}
		fmt.Fprintln(tw, strings.Join(hs, "\t"))
	}
	for _, r := range rows {
		vs := make([]string, len(cols))
		for i, c := range cols {
			vs[i] = cell(c.value(r))
		}
		fmt.Fprintln(tw, strings.Join(vs, "\t"))
	}
	return writeError(tw.Flush())
}

// cell keeps a table row on one line whatever a value holds.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// printList prints a collection: a table of cols, or the list as the
// API's {"items": [...]}.
func printList[T any](p printer, items []T, cols []column[T]) error {
	if p.format == "table" {
		return printTable(p.w, items, cols)
	}
	if items == nil {
		items = []T{}
	}
	return p.printValue(struct {
		Items []T `json:"items"`
	}{items})
}

// printOne prints one value: a one-row table, or the value.
func printOne[T any](p printer, v T, cols []column[T]) error {
	if p.format == "table" {
		return printTable(p.w, []T{v}, cols)
	}
	return p.printValue(v)
}

// timeCell shows a time in UTC to the second, the same width on every row.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func writeError(err error) error {
	if err != nil {
		return runtimeError(fmt.Errorf("writing the output: %w", err))
	}
	return nil
}

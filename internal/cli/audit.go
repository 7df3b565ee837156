package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
)

var auditCols = []column[apitypes.AuditEvent]{
	{"TIME", func(e apitypes.AuditEvent) string { return timeCell(e.OccurredAt) }},
	{"KIND", func(e apitypes.AuditEvent) string { return e.Kind }},
	{"ACTION", func(e apitypes.AuditEvent) string { return e.Action }},
	{"OUTCOME", func(e apitypes.AuditEvent) string {
		if e.ReasonCode != "" {
			return e.Outcome + " (" + e.ReasonCode + ")"
		}
		return e.Outcome
	}},
	{"ACTOR", func(e apitypes.AuditEvent) string { return e.ActorID }},
	{"RESOURCE", func(e apitypes.AuditEvent) string { return string(e.Resource.Kind) + " " + e.Resource.ID }},
	{"REQUEST", func(e apitypes.AuditEvent) string { return e.RequestID }},
}

func newAuditCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "audit", "Read the audit log (administrators)", "  occ audit list --since 1h\n  occ audit list --follow\n  occ audit verify --data-dir ./.occ")
	var (
		q            apitypes.AuditQuery
		kind         string
		since, until string
		follow       bool
		interval     time.Duration
	)
	list := &cobra.Command{
		Use:   "list [filters] [--follow]",
		Short: "List audit events, newest first, or follow new ones",
		Long: `List one page of audit events, newest first (--limit, default 50, at most
200; the next page's --cursor is printed to standard error). Filters are
the API's: --namespace, --resource-kind, --resource, --actor, --action,
--kind, --outcome, --since and --until (RFC 3339 times, or a duration
back from now such as 1h), and --without-outcome: only the "attempted"
records of workspace file writes that no outcome record names, that is
writes still in flight or whose OCC process ended before it recorded the
result (their effect on the file is unknown: read it).

With --follow, print matching events as they happen, oldest first, polling
every --interval, until Ctrl-C. The first poll prints the newest page (or,
with --since, every event since then); each later one reads every page of
events since the last poll, at most 20 pages (of --limit events); past
that, only the newest 20 pages are printed and a warning on standard
error gives the --cursor that lists the rest.`,
		Example: "  occ audit list --since 1h --outcome denied\n" +
			"  occ audit list --resource agt_… --output json\n  occ audit list --follow --kind mutation\n" +
			"  occ audit list --without-outcome --action openclaw.agents.workspace.files.write",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			ctx := cmd.Context()
			q.ResourceKind = apitypes.ResourceKind(kind)
			now := time.Now()
			var err error
			if q.Since, err = parseWhen("--since", since, now); err != nil {
				return err
			}
			if q.Until, err = parseWhen("--until", until, now); err != nil {
				return err
			}
			if cmd.Flags().Changed("namespace") {
				if q.NamespaceID, err = cn.namespaceID(ctx); err != nil {
					return err
				}
			}
			if follow {
				return cn.followAudit(ctx, q, interval)
			}
			page, err := cn.c.ListAuditEvents(ctx, q)
			if err != nil {
				return apiError(err)
			}
			if cn.out.format != "table" {
				return cn.out.printValue(page)
			}
			if err := printTable(cn.out.w, page.Items, auditCols); err != nil {
				return err
			}
			if page.NextCursor != "" {
				cn.info("more: --cursor %s", page.NextCursor)
			}
			return nil
		}),
	}
	// Only list calls the API. verify and export read the database
	// directly and take the server's flags instead: on the group, the
	// client flags would be accepted there and silently ignored.
	addClientFlags(list, f, true)
	fl := list.Flags()
	fl.StringVar(&kind, "resource-kind", "", "only events on resources of this kind (agent, namespace, …)")
	fl.StringVar(&q.ResourceID, "resource", "", "only events on this resource id")
	fl.StringVar(&q.ActorID, "actor", "", "only events by this subject id (usr_… or sa_…)")
	fl.StringVar(&q.Action, "action", "", "only this action (e.g. openclaw.agents.workspace.files.write)")
	fl.StringVar(&q.Kind, "kind", "", "only this kind: bootstrap, mutation, access, authorization_denial")
	fl.StringVar(&q.Outcome, "outcome", "", "only this outcome: success, denied, failure, attempted")
	fl.BoolVar(&q.WithoutOutcome, "without-outcome", false,
		"only write-ahead attempts that no outcome record names (in flight, or OCC died mid-write)")
	fl.StringVar(&since, "since", "", "only events at or after this time (RFC 3339, or a duration ago: 1h)")
	fl.StringVar(&until, "until", "", "only events before this time (RFC 3339, or a duration ago)")
	fl.IntVar(&q.Limit, "limit", 0, "events per page (default 50, at most 200)")
	fl.StringVar(&q.Cursor, "cursor", "", "the page after this cursor (from a previous list)")
	fl.BoolVar(&follow, "follow", false, "print new events as they happen, until Ctrl-C")
	fl.DurationVar(&interval, "interval", 2*time.Second, "with --follow: how often to poll")
	cmd.AddCommand(list, newAuditVerifyCmd(d), newAuditExportCmd(d))
	return cmd
}

// parseWhen reads a time flag: RFC 3339, or a duration before now.
func parseWhen(flag, s string, now time.Time) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, usageError(fmt.Errorf("%s %q is neither an RFC 3339 time nor a duration such as 1h", flag, s))
}

// maxFollowPages bounds the pages one poll of --follow reads, so that a
// burst (or a server that keeps answering a next cursor) cannot hold a
// poll for ever. Past it, the newest pages are printed and a warning
// names the cursor from which the older, skipped events can be listed.
// The list help and docs/cli.md give the number.
const maxFollowPages = 20

// followAudit polls for events at or after the newest seen and prints them
// oldest first. Each poll reads every page (newest first, following
// nextCursor) back to that point, at most maxFollowPages; the first poll
// without --since reads only the newest page, like tail -f. The loop ends
// when ctx does (Ctrl-C), which is success. Events at the newest timestamp
// seen are remembered by id, because the next poll's since includes that
// instant.
func (cn *conn) followAudit(ctx context.Context, q apitypes.AuditQuery, interval time.Duration) error {
	interval = max(interval, 100*time.Millisecond)
	q.Cursor = ""
	seen := map[string]bool{}
	header := cn.out.format == "table"
	for first := true; ; first = false {
		pages := maxFollowPages
		tail := first && q.Since == nil
		if tail {
			pages = 1
		}
		events, rest, err := cn.auditPages(ctx, q, pages)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return apiError(err)
		}
		if rest != "" && !tail {
			since := ""
			if q.Since != nil {
				since = " --since " + q.Since.UTC().Format(time.RFC3339Nano)
			}
			fmt.Fprintf(cn.d.stderr, "occ: more than %d pages of new events; only the newest %d are printed. "+
				"List the older ones with `occ audit list` and the same filters, --limit and%s --cursor %s\n", pages, pages, since, rest)
		}
		var fresh []apitypes.AuditEvent
		for _, e := range events {
			if !seen[e.ID] {
				fresh = append(fresh, e)
			}
		}
		slices.Reverse(fresh)
		if len(fresh) > 0 {
			newest := fresh[len(fresh)-1].OccurredAt
			if q.Since == nil || newest.After(*q.Since) {
				seen = map[string]bool{}
				q.Since = &newest
			}
			for _, e := range fresh {
				if e.OccurredAt.Equal(*q.Since) {
					seen[e.ID] = true
				}
			}
			if err := cn.printEvents(fresh, header); err != nil {
				return err
			}
			header = false
		} else if first && header {
			if err := printTable(cn.out.w, []apitypes.AuditEvent{}, auditCols); err != nil {
				return err
			}
			header = false
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// auditPages reads up to maxPages pages of q, newest first, following
// nextCursor. q.Since bounds them: the server's last page ends at the
// oldest event at or after it. rest is the next cursor when maxPages ran
// out before the last page ("" otherwise).
func (cn *conn) auditPages(ctx context.Context, q apitypes.AuditQuery, maxPages int) (events []apitypes.AuditEvent, rest string, err error) {
	q.Cursor = ""
	for range maxPages {
		page, err := cn.c.ListAuditEvents(ctx, q)
		if err != nil {
			return nil, "", err
		}
		events = append(events, page.Items...)
		if page.NextCursor == "" {
			return events, "", nil
		}
		if page.NextCursor == q.Cursor {
			return nil, "", runtimeError(errors.New("the server answered the same audit cursor twice"))
		}
		q.Cursor = page.NextCursor
	}
	return events, q.Cursor, nil
}

// printEvents prints followed events: table rows (the header once), or
// one JSON or YAML document per event.
func (cn *conn) printEvents(events []apitypes.AuditEvent, header bool) error {
	if cn.out.format == "table" {
		if header {
			return printTable(cn.out.w, events, auditCols)
		}
		// Rows alone: align each batch on its own (a tabwriter cannot
		// know later rows); the columns are fixed-width ids and times.
		return printRows(cn.out.w, events, auditCols)
	}
	for _, e := range events {
		if cn.out.format == "yaml" {
			if _, err := fmt.Fprintln(cn.out.w, "---"); err != nil {
				return writeError(err)
			}
		}
		if err := cn.out.printValue(e); err != nil {
			return err
		}
	}
	return nil
}

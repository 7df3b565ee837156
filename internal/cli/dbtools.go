package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/auditchain"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// This file: the commands that read or copy the database directly, like
// `occ migrate`: occ audit verify, occ audit export, occ backup. They take
// the server's configuration (only --database-url and --data-dir matter)
// and never go through the HTTP API, so they work with no server running
// and cannot be fooled by one.

// withDB opens the configured database without migrating it and runs fn.
func withDB(cmd *cobra.Command, d deps, fn func(ctx context.Context, st *sqlstore.Store, cfg config.Config) error) (err error) {
	cfg, _, err := loadConfig(cmd, d)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	st, err := sqlstore.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return runtimeError(fmt.Errorf("opening database: %w", err))
	}
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = runtimeError(fmt.Errorf("closing database: %w", cerr))
		}
	}()
	return fn(ctx, st, cfg)
}

func newAuditVerifyCmd(d deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain in the database and name the first broken link",
		Long: `Check the tamper-evident hash chain of the audit log, reading the database
directly (like "occ migrate": --database-url, or the SQLite file in
--data-dir). Every event since the chain began carries the hash of the
event committed before it; verify recomputes each hash from the event's
canonical form (docs/reliability.md) and checks that the chain ends at the
stored head.

It prints the number of events checked and the head's sequence number and
hash (record them elsewhere: an attacker who can rewrite the whole database
can also rebuild a chain, but not one that ends at a head you kept), and
exits 0. On the first broken link it prints its sequence number, the event
id and why, and exits 1. It runs beside a live server.`,
		Example: "  occ audit verify --data-dir ./.occ\n  OCC_DATABASE_URL=postgres://occ@db/occ occ audit verify",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDB(cmd, d, func(ctx context.Context, st *sqlstore.Store, _ config.Config) error {
				res, brk, err := st.VerifyAuditChain(ctx)
				if err != nil {
					return runtimeError(fmt.Errorf("reading the audit log: %w", err))
				}
				if brk != nil {
					return runtimeError(brk)
				}
				_, err = fmt.Fprintf(d.stdout, "audit chain intact: %d events chained, head seq %d hash %s\n",
					res.Chained, res.Chained, res.LastHash)
				if err == nil && res.Unlinked > 0 {
					_, err = fmt.Fprintf(d.stdout, "%d older events precede the chain (written before it existed) and are not covered\n", res.Unlinked)
				}
				if err != nil {
					return writeError(err)
				}
				return nil
			})
		},
	}
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

// exportLine is one NDJSON line of occ audit export: the event in its API
// form, plus its chain link when it has one.
type exportLine struct {
	apitypes.AuditEvent
	Chain *auditchain.Link `json:"chain,omitempty"`
}

func newAuditExportCmd(d deps) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "export [--since TIME]",
		Short: "Stream audit events from the database as NDJSON, in commit order",
		Long: `Write audit events to standard output as NDJSON (one JSON object per line),
oldest first in commit order, reading the database directly (like
"occ migrate"). Each line is the event as GET /audit-events returns it,
plus "chain": {"seq", "prevHash", "hash"} for events in the hash chain,
so a SIEM can check the chain itself (docs/reliability.md).

--since keeps events at or after a time (RFC 3339, or a duration back from
now such as 24h). Rows are streamed: memory does not grow with the log.`,
		Example: "  occ audit export --data-dir ./.occ --since 24h > audit.ndjson\n" +
			"  OCC_DATABASE_URL=postgres://occ@db/occ occ audit export --since 2026-12-01T00:00:00Z",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			from, err := parseWhen("--since", since, time.Now())
			if err != nil {
				return err
			}
			return withDB(cmd, d, func(ctx context.Context, st *sqlstore.Store, _ config.Config) error {
				w := bufio.NewWriter(d.stdout)
				enc := json.NewEncoder(w)
				var werr error
				var t time.Time
				if from != nil {
					t = *from
				}
				err := st.ScanAuditChain(ctx, t, func(en auditchain.Entry) error {
					if werr = enc.Encode(exportLine{AuditEvent: apiAuditEvent(en.Event), Chain: en.Link}); werr != nil {
						return werr
					}
					return nil
				})
				if werr != nil {
					return writeError(werr)
				}
				if err != nil {
					return runtimeError(fmt.Errorf("reading the audit log: %w", err))
				}
				if err := w.Flush(); err != nil {
					return writeError(err)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only events at or after this time (RFC 3339, or a duration ago: 24h)")
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

// apiAuditEvent is the API form of a stored event (as GET /audit-events).
func apiAuditEvent(e store.AuditEvent) apitypes.AuditEvent {
	return apitypes.AuditEvent{ID: e.ID, OccurredAt: e.OccurredAt, Kind: e.Kind, ActorID: e.ActorID,
		Credential: e.Credential, RequestID: e.RequestID, Action: e.Action,
		Resource: apitypes.AuditResource{Kind: apitypes.ResourceKind(e.Resource.Kind), ID: e.Resource.ID,
			NamespaceID: e.Resource.NamespaceID},
		Outcome: e.Outcome, ReasonCode: e.ReasonCode, Details: e.Details, AttemptID: e.AttemptID}
}

func newBackupCmd(d deps) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write a consistent copy of the embedded SQLite database, beside a running server",
		Long: `Write an online, consistent copy of the embedded SQLite database (the
occ.db in --data-dir, or a sqlite:/file: --database-url) to FILE, which
must not exist. Run it with the same --data-dir as the live "occ server":
it reads one snapshot while the server keeps writing, and the copy is a
single compact file (no -wal, no free pages) created with mode 0600,
because it holds password and key hashes and staged workspace files.

Restore: stop the server, replace <data-dir>/occ.db with the copy, delete
occ.db-wal and occ.db-shm if present, start the server (docs/reliability.md).
For PostgreSQL use pg_dump instead; this command refuses it.`,
		Example: "  occ backup --data-dir ./.occ --to /backups/occ-$(date +%F).db",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usageError(errors.New("--to FILE is required"))
			}
			return withDB(cmd, d, func(ctx context.Context, st *sqlstore.Store, _ config.Config) error {
				if st.Engine() != sqlstore.EngineSQLite {
					return usageError(errors.New("occ backup copies the embedded SQLite database; back up PostgreSQL with pg_dump (docs/reliability.md)"))
				}
				if err := st.BackupTo(ctx, to); err != nil {
					return runtimeError(err)
				}
				if _, err := fmt.Fprintf(d.stdout, "backup written to %s\n", to); err != nil {
					return writeError(err)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the backup file to create (must not exist)")
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

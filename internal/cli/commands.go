package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/internal/buildinfo"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
)

func newServerCmd(d deps) *cobra.Command {
	cmd := &cobra.Command{
		Use: "server",
		Example: `  occ server                                   # the embedded default: SQLite in ./.occ, 127.0.0.1:8080
  occ server --config /etc/occ/occ.yaml        # production settings from a file
  OCC_DATABASE_URL=postgres://occ@db/occ occ server --embedded-worker=false`,
		Short: "Run the OCC HTTP API until SIGTERM or Ctrl-C",
		Long: `Run the OCC HTTP API until SIGTERM or Ctrl-C.

With no flags it uses the embedded default: SQLite in ./.occ, listening on
127.0.0.1:8080. On the first start against an empty database it creates the
bootstrap administrator. On SIGTERM it stops accepting connections and
gives in-flight requests --shutdown-timeout to finish; a second signal
stops it at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := loadConfig(cmd, d)
			if err != nil {
				return err
			}
			logger.Info("occ server starting",
				"version", buildinfo.Version, "commit", buildinfo.Commit, "config", cfg)
			ctx := cmd.Context()
			err = d.runServer(ctx, cfg, logger)
			// A shutdown we asked for is success, even if the server
			// reports it as the context's error.
			if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				return runtimeError(err)
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

func newWorkerCmd(d deps) *cobra.Command {
	cmd := &cobra.Command{
		Use: "worker",
		Example: `  occ worker --config /etc/occ/occ.yaml
  OCC_DATABASE_URL=postgres://occ@db/occ occ worker`,
		Short: "Run only the deployment worker until SIGTERM or Ctrl-C",
		Long: `Run only the deployment worker until SIGTERM or Ctrl-C.

"occ server" runs a worker itself. Run "occ worker" on its own when a
production deployment separates API and worker replicas; any number of
workers can share one PostgreSQL database: each work item is claimed with a
lease, and an Agent's work runs one item at a time, in order.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := loadConfig(cmd, d)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			err = d.runWorker(ctx, cfg, logger)
			if err != nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				return runtimeError(err)
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

func newMigrateCmd(d deps) *cobra.Command {
	cmd := &cobra.Command{
		Use: "migrate",
		Example: `  OCC_DATABASE_URL=postgres://occ@db/occ occ migrate
  occ migrate --data-dir ./.occ`,
		Short: "Apply database migrations and exit",
		Long: `Apply the database migrations that the binary carries and exit.

"occ server" applies them itself on start; run "occ migrate" on its own when
a production deployment separates schema changes from serving (for example
as a Kubernetes Job before a rollout). It reads the same configuration as
"occ server"; only the database URL and the data dir matter to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg, logger, err := loadConfig(cmd, d)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			st, err := d.openStore(ctx, cfg.DatabaseURL, cfg.DataDir)
			if err != nil {
				return runtimeError(fmt.Errorf("opening database: %w", err))
			}
			defer func() {
				if cerr := st.Close(); cerr != nil && err == nil {
					err = runtimeError(fmt.Errorf("closing database: %w", cerr))
				}
			}()
			if err := st.Migrate(ctx); err != nil {
				return runtimeError(fmt.Errorf("applying migrations: %w", err))
			}
			logger.Info("migrations applied", "database", cfg.RedactedDatabaseURL())
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), registry.ConfigTable())
	return cmd
}

func newVersionCmd(d deps) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Example: `  occ version`,
		Short:   "Print the version, commit and Go version of this binary",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(d.stdout, "occ %s\ncommit: %s\ngo: %s\n",
				buildinfo.Version, buildinfo.Commit, buildinfo.GoVersion())
			if err != nil {
				return runtimeError(err)
			}
			return nil
		},
	}
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/workspace"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// migrator is what `occ migrate` needs of a store.
type migrator interface {
	Migrate(ctx context.Context) error
	Close() error
}

// deps are the parts of OCC the commands start. Production uses the real
// packages; tests substitute fakes.
type deps struct {
	runServer func(ctx context.Context, cfg config.Config, logger *slog.Logger) error
	runWorker func(ctx context.Context, cfg config.Config, logger *slog.Logger) error
	openStore func(ctx context.Context, databaseURL, dataDir string) (migrator, error)
	stdin     io.Reader // the client commands' passwords, prompts and file content
	stdout    io.Writer
	stderr    io.Writer
	getenv    func(string) string
	// executable locates the running binary (install-self); execve
	// replaces the process (workspace-setup --exec) and returns only on
	// failure.
	executable func() (string, error)
	execve     func(argv0 string, argv, envv []string) error
	// verifySetup is setuprunner.Verify when nil, and verifyTimeout
	// VerifyTimeout when zero (tests replace both to make a verifier
	// that does not answer).
	verifySetup   func(context.Context, workspace.Setup, setuprunner.Options) error
	verifyTimeout time.Duration
	// requestTimeout bounds each API call of a client command, and each
	// poll of a --wait, instead of the constant requestTimeout when not
	// zero (tests shorten it to make a server that does not answer).
	requestTimeout time.Duration
}

func defaultDeps() deps {
	return deps{
		runServer: server.Run,
		runWorker: server.RunWorker,
		openStore: func(ctx context.Context, databaseURL, dataDir string) (migrator, error) {
			s, err := sqlstore.Open(ctx, databaseURL, dataDir)
			if err != nil {
				// Return a nil interface, not a nil *Store inside one.
				return nil, err
			}
			return s, nil
		},
		stdin:      os.Stdin,
		stdout:     os.Stdout,
		stderr:     os.Stderr,
		getenv:     os.Getenv,
		executable: os.Executable,
		execve:     syscall.Exec,
	}
}

// Execute runs occ with the process's arguments, streams and environment
// and returns the exit code for os.Exit.
func Execute() int {
	return execute(os.Args[1:], defaultDeps())
}

// execute ties the command's context to SIGINT and SIGTERM: the first
// signal cancels it, which is how `occ server` learns to shut down
// gracefully. Once it has fired, default signal handling is restored, so a
// second signal ends a shutdown that hangs instead of being swallowed.
func execute(args []string, d deps) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return run(ctx, args, d)
}

// run executes the command tree and maps its outcome to an exit code,
// printing an error exactly once.
func run(ctx context.Context, args []string, d deps) int {
	root := newRoot(d)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	// Some commands promise one fixed line on any failure (see fixedError).
	var fe *fixedError
	if errors.As(err, &fe) {
		fmt.Fprintln(d.stderr, fe.text)
		return fe.code
	}
	// Each line gets the prefix: Validate reports several problems at once.
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		fmt.Fprintf(d.stderr, "occ: %s\n", line)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Anything not marked by our own RunE functions came from cobra
	// before a command ran: an unknown command or flag, a bad flag value,
	// extra arguments.
	fmt.Fprintf(d.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	return exitUsage
}

// exitError marks an error from a command's own code with its exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func runtimeError(err error) error { return &exitError{code: exitRuntime, err: err} }
func usageError(err error) error   { return &exitError{code: exitUsage, err: err} }

func newRoot(d deps) *cobra.Command {
	root := &cobra.Command{
		Use:   "occ",
		Short: "OCC, the control plane for OpenClaw agents",
		Long: `OCC runs and manages OpenClaw agents for an organization.

With no flags, "occ server" runs the embedded default: SQLite in ./.occ and
the HTTP API on 127.0.0.1:8080. Every flag also has an OCC_* environment
variable and a key in the --config YAML file; see docs/configuration.md.`,
		// Errors are printed by run, once; usage only on request.
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		// `occ` alone is a usage error, like `go` alone: print the help
		// where errors go and exit 2.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(d.stderr)
			_ = cmd.Help()
			return usageError(errors.New("missing command"))
		},
	}
	root.SetOut(d.stdout)
	root.SetErr(d.stderr)
	// cobra's completion command (occ completion bash|zsh|fish|powershell)
	// is part of the client commands' interface (docs/cli.md).
	root.AddCommand(newServerCmd(d), newWorkerCmd(d), newMigrateCmd(d), newVersionCmd(d), newWorkspaceSetupCmd(d),
		newInstallSelfCmd(d), newBackupCmd(d), newSSHTokenReaderCmd(d))
	addClientCmds(root, d)
	return root
}

// loadConfig resolves the configuration for cmd and builds the logger it
// asks for. A configuration error is a usage error: the command cannot run
// as configured.
func loadConfig(cmd *cobra.Command, d deps) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(cmd.Flags(), d.getenv, registry.ConfigTable())
	if err != nil {
		return config.Config{}, nil, usageError(err)
	}
	return cfg, newLogger(d.stderr, cfg.LogLevel, cfg.LogFormat), nil
}

// newLogger builds the process logger. Logs go to standard error so that
// standard output carries only what a command prints on purpose. level
// and format were validated by config.Validate.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

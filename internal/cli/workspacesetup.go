package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// Environment variables of `occ workspace-setup`, the reference runner's
// names, so drivers deliver the same inputs to it as to the Node runner.
const (
	envSetupPath  = "OPENCLAW_WORKSPACE_SETUP_PATH"
	envWorkspace  = "OPENCLAW_WORKSPACE_DIR"
	envExecutable = "OPENCLAW_EXECUTABLE"
	envStateDir   = "OPENCLAW_STATE_DIR"

	defaultExecutable = "/app/openclaw.mjs"
)

// fixedError is a failure whose whole report is a fixed text: run prints
// text (and nothing else) to standard error and exits with code.
type fixedError struct {
	text string
	code int
}

func (e *fixedError) Error() string { return e.text }

// errWorkspaceSetupFailed is every failure of `occ workspace-setup`,
// usage errors included: its callers (drivers, init containers) key on
// exit 1 and this one line, and anything more could leak what the
// payload or the workspace holds. Details go only to --log.
var errWorkspaceSetupFailed = &fixedError{text: setuprunner.ErrFailed.Error(), code: exitRuntime}

type workspaceSetupFlags struct {
	payload, workspace, node, openclaw, stateDir, logFile string
	verify, exec                                          bool
}

func newWorkspaceSetupCmd(d deps) *cobra.Command {
	var f workspaceSetupFlags
	cmd := &cobra.Command{
		Use: "workspace-setup",
		Example: `  occ workspace-setup --payload /run/occ/workspace-setup/payload.json --workspace /home/node/.openclaw/workspace
  occ workspace-setup --verify --payload identity.json --workspace ws --exec -- node /app/openclaw.mjs gateway run`,
		Short: "Apply or verify an Agent's initial workspace files where its workspace lives",
		Long: `Apply an Agent's initial workspace files to its workspace, once, or verify
that a completed setup's marker is in place (--verify).

This is the workspace setup runner every Compute driver runs: in a setup
container, on a remote host, or as a Kubernetes init container. It reads
one JSON payload {id, namespaceId, agentId, defaultsId?, files?, completed}
from --payload (or $OPENCLAW_WORKSPACE_SETUP_PATH, or standard input),
works in --workspace (or $OPENCLAW_WORKSPACE_DIR) and runs native
"openclaw setup --baseline" with --node and --openclaw (or
$OPENCLAW_EXECUTABLE, default /app/openclaw.mjs).

On success it prints one line {"completed":true,"id":"<id>"} and, when a
pending payload came from a file, removes that file. On any failure it
prints only WORKSPACE_SETUP_FAILED to standard error and exits 1; details
(steps and error classes, never content) go to --log. See
docs/workspace-setup.md.

With --exec, the command after "--" (looked up in PATH when it has no
slash) replaces this process once the run succeeded, with the same
environment, and the success line is not printed:

  occ workspace-setup --verify --payload identity.json --workspace W \
    --exec -- node /app/openclaw.mjs gateway run

So a gateway container starts only over a verified workspace, without a
shell. If the run or the exec fails, the command is never started.`,
		Args: func(cmd *cobra.Command, args []string) error {
			// Arguments are only the command of --exec, all after "--", so
			// none of them can be mistaken for one of occ's flags.
			if f.exec != (len(args) > 0) || (f.exec && cmd.ArgsLenAtDash() != 0) {
				return errWorkspaceSetupFailed
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			defer func() {
				// Nothing of a panic may reach standard error.
				if recover() != nil {
					err = errWorkspaceSetupFailed
				}
			}()
			if err := runWorkspaceSetup(cmd, d, f, args); err != nil {
				return errWorkspaceSetupFailed
			}
			return nil
		},
	}
	// A bad flag is a failure like any other: same text, same exit code.
	cmd.SetFlagErrorFunc(func(*cobra.Command, error) error { return errWorkspaceSetupFailed })
	fl := cmd.Flags()
	fl.StringVar(&f.payload, "payload", "", "payload file; env "+envSetupPath+"; standard input when neither is set")
	fl.StringVar(&f.workspace, "workspace", "", "workspace directory, absolute and clean; env "+envWorkspace)
	fl.StringVar(&f.node, "node", "node", "node binary for native setup (a path, or a name looked up in PATH)")
	fl.StringVar(&f.openclaw, "openclaw", defaultExecutable, "OpenClaw's openclaw.mjs; env "+envExecutable)
	fl.StringVar(&f.stateDir, "state-dir", "", "HOME and OPENCLAW_STATE_DIR for native setup; env "+envStateDir+"; a private temporary directory when neither is set")
	fl.BoolVar(&f.verify, "verify", false, "verify only: the payload is the identity with completed:true, and the marker must match it")
	fl.BoolVar(&f.exec, "exec", false, "on success, print nothing and replace this process with the command given after --")
	fl.StringVar(&f.logFile, "log", "", "append step-level details (never file content) to this file")
	return cmd
}

// runWorkspaceSetup does the work; any error it returns is reported only
// as WORKSPACE_SETUP_FAILED (the detail is in the log when there is one).
// With --exec it prints nothing on success (standard output belongs to
// the command) and replaces the process with command; it returns only if
// something failed.
func runWorkspaceSetup(cmd *cobra.Command, d deps, f workspaceSetupFlags, command []string) (err error) {
	flags := cmd.Flags()
	// A flag wins over its environment variable; an empty environment
	// variable counts as unset.
	pick := func(flag, env string) string {
		if flags.Changed(flag) {
			v, _ := flags.GetString(flag)
			return v
		}
		if v := d.getenv(env); v != "" {
			return v
		}
		v, _ := flags.GetString(flag)
		return v
	}
	var logw io.Writer
	if f.logFile != "" {
		lf, err := os.OpenFile(f.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer lf.Close()
		logw = lf
	}
	logf := func(format string, args ...any) {
		if logw != nil {
			fmt.Fprintf(logw, format+"\n", args...)
		}
	}
	defer func() {
		if err != nil && !errors.Is(err, setuprunner.ErrFailed) {
			// Runner failures were logged by the runner; these are the
			// command's own (payload file, output).
			logf("workspace-setup: failed: %s", commandErrClass(err))
		}
	}()

	// The command is resolved first, so one that cannot start fails
	// before the run changes anything.
	var execPath string
	if f.exec {
		if execPath, err = exec.LookPath(command[0]); err != nil {
			return fmt.Errorf("exec: %w", err)
		}
	}

	payloadPath := pick("payload", envSetupPath)
	if flags.Changed("payload") && payloadPath == "" {
		return errors.New("empty --payload")
	}
	var in io.Reader = cmd.InOrStdin()
	if payloadPath != "" {
		pf, err := os.Open(payloadPath)
		if err != nil {
			return err
		}
		defer pf.Close()
		in = pf
	}
	setup, err := setuprunner.ParsePayload(in)
	if err != nil {
		logf("workspace-setup: %v", err)
		return err
	}
	opts := setuprunner.Options{
		Workspace: pick("workspace", envWorkspace),
		Runtime:   setuprunner.Runtime{Node: f.node, Executable: pick("openclaw", envExecutable)},
		StateDir:  pick("state-dir", envStateDir),
		Log:       logw,
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if f.verify {
		err = d.boundedVerify(ctx, setup, opts, logf)
	} else {
		err = setuprunner.Apply(ctx, setup, opts)
	}
	if err != nil {
		return err
	}
	// A delivered pending payload holds file content: remove it now that
	// the files are in place. A completed metadata file may be the
	// driver's permanent restart guard, so it stays. Read-only or foreign
	// delivery (a Secret volume, say) cannot be removed and need not be.
	if payloadPath != "" && !setup.Completed {
		if err := os.Remove(payloadPath); err != nil && !ignorableUnlinkError(err) {
			return err
		}
	}
	if f.exec {
		// Every file this process opened is close-on-exec (Go's default):
		// the command inherits the standard streams and the environment
		// only. execve returns only when it failed.
		return d.execve(execPath, command, os.Environ())
	}
	line := append([]byte(`{"completed":true,"id":`), workspace.AppendJSString(nil, setup.ID)...)
	line = append(line, "}\n"...)
	if _, err := d.stdout.Write(line); err != nil {
		return err
	}
	return nil
}

// ignorableUnlinkError is the reference's list: ENOENT, EROFS, EACCES,
// EPERM.
func ignorableUnlinkError(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// commandErrClass describes an error of the command itself without its
// text (an os error names a path; keep only the errno).
func commandErrClass(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "error"
}

// VerifyTimeout bounds `occ workspace-setup --verify`, as the reference's
// verifier bounds its runner (10,000 ms). The check reads two small files,
// so the bound only matters for storage that stops answering (a hung
// network file system): the verifier then fails, and with --exec the
// runtime never starts, instead of the start hanging with no error. Apply
// has no such bound here: the driver that runs it bounds the whole run, and
// the runner bounds each native setup run.
const VerifyTimeout = 10 * time.Second

// boundedVerify runs the verifier within VerifyTimeout. A verifier still
// blocked at the deadline is left behind (a read stuck in the kernel
// cannot be interrupted) and the command fails; the process exits right
// after.
func (d deps) boundedVerify(ctx context.Context, s workspace.Setup, o setuprunner.Options, logf func(string, ...any)) error {
	verify, timeout := d.verifySetup, d.verifyTimeout
	if verify == nil {
		verify = setuprunner.Verify
	}
	if timeout <= 0 {
		timeout = VerifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- verify(ctx, s, o) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		logf("workspace-setup: verify did not finish within %s", timeout)
		return fmt.Errorf("verify: %w", ctx.Err())
	}
}

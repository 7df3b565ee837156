package setuprunner

import (
	"context"
	"errors"
	"syscall"
)

// ErrFailed is wrapped by every failure of ParsePayload, Apply and Verify.
// Its text is the only thing to say about a failure wherever it is shown
// (the command's standard error, a container's termination message, a
// deployment error): callers key on this exact text, and a fixed text
// cannot leak anything of the payload or the workspace. Details belong
// in logs (Options.Log).
var ErrFailed = errors.New("WORKSPACE_SETUP_FAILED")

// Step names, for failures, logs and Options.AfterStep.
const (
	stepPayload     = "payload"        // payload or workspace.Setup validation
	stepWorkspace   = "workspace"      // workspace path rules
	stepMarker      = "marker"         // marker read and comparison
	stepPackage     = "package"        // OpenClaw package lookup
	stepDefaults    = "defaults"       // template rendering and defaults identity
	stepConflicts   = "conflicts"      // conflict pre-check of the four files
	stepPreflight   = "preflight"      // AfterStep: all read-only checks passed
	stepPrepared    = "prepared"       // AfterStep: workspace and private config created
	stepNative1     = "native-setup-1" // first native setup
	stepWrite       = "write"          // failure step of writing the submitted files
	stepTempWritten = "temp-written:"  // AfterStep prefix: reserved temp file synced, not renamed
	stepFileWritten = "file-written:"  // AfterStep prefix: one submitted file renamed into place
	stepNative2     = "native-setup-2" // second native setup
	stepVerified    = "files-verified" // submitted files re-read and equal
	stepMarkerWrite = "marker-written" // marker renamed into place
	stepAborted     = "aborted"        // failure step when AfterStep returned an error
	stepCleanup     = "cleanup"        // removing the private temp dir or the reserved temp file
	stepContext     = "context"        // the caller's context ended between steps
)

// failure is the concrete type of every runner error. Its text names the
// step and a class (a fixed word, one of the four file names, or an errno
// description), never content or paths, so callers may log it; API
// clients still get only ErrFailed's text.
type failure struct {
	step  string
	class string
	err   error // the cause, for errors.Is/As; never part of the text
}

func newFailure(step, class string, cause error) error {
	return &failure{step: step, class: class, err: cause}
}

func (f *failure) Error() string {
	return "workspace setup failed at " + f.step + ": " + f.class
}

// Unwrap lets errors.Is find ErrFailed and the cause (an os error, a
// context error, an AfterStep error).
func (f *failure) Unwrap() []error {
	if f.err == nil {
		return []error{ErrFailed}
	}
	return []error{ErrFailed, f.err}
}

// errClass describes err without its text: os errors carry paths and
// encoding/json errors can quote a character of the document, so only the
// errno description or a fixed word is kept.
func errClass(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "error"
	case errors.Is(err, errTooLarge):
		return "too-large"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "error"
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/openclaw/occ/client"
)

// The exit codes of the client commands, beyond exitOK, exitRuntime and
// exitUsage. Scripts branch on them, so they are part of occ's interface:
// exitCodes below is the one table (documented in docs/cli.md; a test
// checks that the page lists every row).
const (
	exitNotFound       = 3
	exitAuth           = 4
	exitConflict       = 5
	exitUnknownOutcome = 6
	exitUnreachable    = 7
)

// exitCodes describes every exit code, in order.
var exitCodes = []struct {
	Code    int
	Meaning string
}{
	{exitOK, "success"},
	{exitRuntime, "the command ran and failed: a server error (500, 503 DEPENDENCY_UNAVAILABLE), a throttled sign-in (429: try again after the time it names), a failed deployment, a local file error"},
	{exitUsage, "the command was not run as written: unknown command or flag, bad argument, an ambiguous name, or the server refused the input (400 INVALID_REQUEST, 413, 415)"},
	{exitNotFound, "not found: an unknown name, or 404 NOT_FOUND (absent, or hidden from you)"},
	{exitAuth, "not logged in, wrong password, expired or revoked key or session (401), or not allowed (403)"},
	{exitConflict, "conflict: 409 (name taken, in use, lifecycle) or 412 PRECONDITION_FAILED (the file changed since you read it)"},
	{exitUnknownOutcome, "a write may or may not have been applied (503 UNKNOWN_OUTCOME, or the reply was lost) and reading back did not settle it"},
	{exitUnreachable, "the server could not be reached (connection refused, DNS, TLS, timeout), or a --wait ran out of its --timeout while the work goes on"},
}

// apiError marks an error of a client call with the exit code of its
// class and says what happened in the API's own words: message, code and
// request id, which an operator quotes when reporting a problem.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return &exitError{code: codeForAPIError(ce), err: errors.New(describeAPIError(ce))}
	}
	if unreachable(err) {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("cannot reach the server: %s", transportReason(err))}
	}
	return runtimeError(err)
}

// codeForAPIError maps an error envelope to its exit code.
func codeForAPIError(e *client.Error) int {
	switch {
	case e.Code == "UNKNOWN_OUTCOME":
		return exitUnknownOutcome
	case e.Status == 401 || e.Status == 403:
		return exitAuth
	case e.Status == 404:
		return exitNotFound
	case e.Status == 409 || e.Status == 412:
		return exitConflict
	case e.Status == 400 || e.Status == 413 || e.Status == 415:
		return exitUsage
	}
	return exitRuntime
}

// describeAPIError is the API's message with a hint for a 401: on any
// command but login, it means the saved credential no longer works.
func describeAPIError(e *client.Error) string {
	s := apiMessage(e)
	if e.Status == 401 {
		s += "\nYour session or key is not valid (expired, revoked or wrong): run `occ login` again."
	}
	return s
}

// apiMessage is the API's own words: message, details, code and request
// id.
func apiMessage(e *client.Error) string {
	var b strings.Builder
	b.WriteString(e.Message)
	if len(e.Details) > 0 {
		parts := make([]string, len(e.Details))
		for i, d := range e.Details {
			parts[i] = d.Path + " " + d.Code
		}
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	fmt.Fprintf(&b, " [%s", e.Code)
	if e.RequestID != "" {
		fmt.Fprintf(&b, ", request %s", e.RequestID)
	}
	b.WriteString("]")
	return b.String()
}

// unreachable reports whether err is a transport failure: the request
// never got an HTTP answer.
func unreachable(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de) ||
		errors.Is(err, context.DeadlineExceeded)
}

// transportReason is the innermost useful text of a transport error,
// without the URL (which is the user's own).
func transportReason(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Op + ": " + oe.Err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer before the deadline"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// notFoundError, authError, conflictError and unknownOutcomeError mark
// the command's own findings with their class.
func notFoundError(format string, a ...any) error {
	return &exitError{code: exitNotFound, err: fmt.Errorf(format, a...)}
}

func authError(err error) error { return &exitError{code: exitAuth, err: err} }

func conflictError(format string, a ...any) error {
	return &exitError{code: exitConflict, err: fmt.Errorf(format, a...)}
}

func unknownOutcomeError(format string, a ...any) error {
	return &exitError{code: exitUnknownOutcome, err: fmt.Errorf(format, a...)}
}

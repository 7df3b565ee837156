// Package errkind owns the small set of error kinds that every layer of OCC
// returns, and the one table that maps each kind to an HTTP status and a
// stable public error code.
//
// Domain code creates errors with the constructors below and wraps them with
// fmt.Errorf("...: %w", err); the HTTP layer finds the kind with errors.As and
// never inspects message text. Anything that is not a *Error is an internal
// error: its text is logged, never sent to the client.
package errkind

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Kind classifies a failure. The zero value is Internal.
type Kind int

const (
	Internal           Kind = iota // 500 INTERNAL_ERROR; details never leave the process
	Invalid                        // 400 INVALID_REQUEST
	Unauthenticated                // 401 UNAUTHENTICATED
	PermissionDenied               // 403 FORBIDDEN (the caller can see the target)
	NotFound                       // 404 NOT_FOUND (absent, or hidden from the caller)
	MethodNotAllowed               // 405 METHOD_NOT_ALLOWED
	Conflict                       // 409 RESOURCE_CONFLICT or a more specific code
	PreconditionFailed             // 412 PRECONDITION_FAILED
	TooLarge                       // 413 PAYLOAD_TOO_LARGE
	UnsupportedMedia               // 415 UNSUPPORTED_MEDIA_TYPE
	TooManyRequests                // 429 TOO_MANY_REQUESTS: throttled; Data["retryAfterSeconds"] says when to come back
	NotImplemented                 // 501 NOT_IMPLEMENTED
	Unavailable                    // 503 DEPENDENCY_UNAVAILABLE
	OutcomeUnknown                 // 503 UNKNOWN_OUTCOME: a write may or may not have been applied
)

// Public error codes. Codes are part of the API contract; never rename one.
const (
	CodeInternal           = "INTERNAL_ERROR"
	CodeInvalidRequest     = "INVALID_REQUEST"
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeForbidden          = "FORBIDDEN"
	CodeNotFound           = "NOT_FOUND"
	CodeMethodNotAllowed   = "METHOD_NOT_ALLOWED"
	CodeResourceConflict   = "RESOURCE_CONFLICT"
	CodeAgentDeleting      = "AGENT_DELETING"
	CodeNamespaceNotReady  = "NAMESPACE_NOT_READY"
	CodeNamespaceNotEmpty  = "NAMESPACE_NOT_EMPTY"
	CodeInstallationExists = "INSTALLATION_EXISTS"
	CodePreconditionFailed = "PRECONDITION_FAILED"
	CodePayloadTooLarge    = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMedia   = "UNSUPPORTED_MEDIA_TYPE"
	CodeTooManyRequests    = "TOO_MANY_REQUESTS"
	CodeNotImplemented     = "NOT_IMPLEMENTED"
	CodeUnavailable        = "DEPENDENCY_UNAVAILABLE"
	CodeUnknownOutcome     = "UNKNOWN_OUTCOME"
)

// Detail codes name what is wrong with one field of a request.
const (
	DetailRequired      = "REQUIRED"
	DetailUnknownField  = "UNKNOWN_FIELD"
	DetailInvalidType   = "INVALID_TYPE"
	DetailInvalidFormat = "INVALID_FORMAT"
	DetailInvalidValue  = "INVALID_VALUE"
	DetailTooLong       = "TOO_LONG"
	DetailTooDeep       = "TOO_DEEP"
)

// MaxDetails caps how many field details one error carries.
const MaxDetails = 32

// MaxMessage caps the length of a public error message, in characters as
// the reference counts them: UTF-16 code units.
const MaxMessage = 256

// Detail points at one offending field with a JSON pointer (RFC 6901).
// Its wire form is apitypes.ErrorDetail.
type Detail struct {
	Path string
	Code string
}

// Error is a classified failure. Message is safe to show to the caller; it
// must never contain secrets or file content. Cause is for logs only.
type Error struct {
	Kind    Kind
	Code    string // public code; empty means the kind's default
	Message string
	Details []Detail
	// Data holds extra machine-readable fields for the error body, such as
	// the current hash after a failed precondition. Never content or secrets.
	Data  map[string]any
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.PublicCode(), e.Message, e.Cause)
	}
	return e.PublicCode() + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// PublicCode is the code sent to clients.
func (e *Error) PublicCode() string {
	if e.Code != "" {
		return e.Code
	}
	return defaultCode[e.Kind]
}

// Status is the HTTP status for the error.
func (e *Error) Status() int { return status[e.Kind] }

// status is the one table from kind to HTTP status. The numbers are
// written out instead of taken from net/http because every layer imports
// errkind, including the store, which must not depend on HTTP (the
// dependency rule in docs/architecture.md, enforced by internal/deptest);
// TestStatusAndCode checks each kind's number and code.
var status = map[Kind]int{
	Internal:           500, // http.StatusInternalServerError
	Invalid:            400, // http.StatusBadRequest
	Unauthenticated:    401, // http.StatusUnauthorized
	PermissionDenied:   403, // http.StatusForbidden
	NotFound:           404, // http.StatusNotFound
	MethodNotAllowed:   405, // http.StatusMethodNotAllowed
	Conflict:           409, // http.StatusConflict
	PreconditionFailed: 412, // http.StatusPreconditionFailed
	TooLarge:           413, // http.StatusRequestEntityTooLarge
	UnsupportedMedia:   415, // http.StatusUnsupportedMediaType
	TooManyRequests:    429, // http.StatusTooManyRequests
	NotImplemented:     501, // http.StatusNotImplemented
	Unavailable:        503, // http.StatusServiceUnavailable
	OutcomeUnknown:     503, // http.StatusServiceUnavailable
}

var defaultCode = map[Kind]string{
	Internal:           CodeInternal,
	Invalid:            CodeInvalidRequest,
	Unauthenticated:    CodeUnauthenticated,
	PermissionDenied:   CodeForbidden,
	NotFound:           CodeNotFound,
	MethodNotAllowed:   CodeMethodNotAllowed,
	Conflict:           CodeResourceConflict,
	PreconditionFailed: CodePreconditionFailed,
	TooLarge:           CodePayloadTooLarge,
	UnsupportedMedia:   CodeUnsupportedMedia,
	TooManyRequests:    CodeTooManyRequests,
	NotImplemented:     CodeNotImplemented,
	Unavailable:        CodeUnavailable,
	OutcomeUnknown:     CodeUnknownOutcome,
}

// New returns an error of kind k with a public message.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Message: msg} }

// Newf is New with formatting. Never format content or secrets into msg.
func Newf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// RetryAfterKey is the Data key of an error that tells the client when to
// try again, in whole seconds (an int). The HTTP layer also sends it as the
// Retry-After header.
const RetryAfterKey = "retryAfterSeconds"

// WithRetryAfter returns an error of kind k (TooManyRequests or
// Unavailable) that asks the client to come back after d, rounded up to a
// whole second and at least one.
func WithRetryAfter(k Kind, msg string, d time.Duration) *Error {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return &Error{Kind: k, Message: msg, Data: map[string]any{RetryAfterKey: secs}}
}

// WithCode returns an error of kind k that answers with a specific code.
func WithCode(k Kind, code, msg string) *Error { return &Error{Kind: k, Code: code, Message: msg} }

// InvalidDetails is a 400 INVALID_REQUEST with field details.
func InvalidDetails(msg string, details ...Detail) *Error {
	return &Error{Kind: Invalid, Message: msg, Details: details}
}

// Wrap classifies cause as kind k with a public message; cause stays private.
func Wrap(k Kind, msg string, cause error) *Error { return &Error{Kind: k, Message: msg, Cause: cause} }

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// KindOf returns the kind of err; Internal for unclassified errors.
func KindOf(err error) Kind {
	if e := As(err); e != nil {
		return e.Kind
	}
	return Internal
}

// Is reports whether err is classified as kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// specificCodes are the codes an error of a kind may answer with instead
// of its default code (WithCode).
var specificCodes = map[Kind][]string{
	Conflict: {CodeAgentDeleting, CodeNamespaceNotReady, CodeNamespaceNotEmpty, CodeInstallationExists},
}

// CodesByStatus lists every public error code by the HTTP status it is
// sent with: the contract the OpenAPI document publishes.
func CodesByStatus() map[int][]string {
	out := map[int][]string{}
	for k, code := range defaultCode {
		s := status[k]
		out[s] = append(out[s], code)
		out[s] = append(out[s], specificCodes[k]...)
	}
	for s := range out {
		slices.Sort(out[s])
	}
	return out
}

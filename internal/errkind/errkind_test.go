package errkind

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStatusAndCode(t *testing.T) {
	type sc struct {
		Status int
		Code   string
	}
	tests := []struct {
		err  *Error
		want sc
	}{
		{New(Invalid, "x"), sc{400, "INVALID_REQUEST"}},
		{New(Unauthenticated, "x"), sc{401, "UNAUTHENTICATED"}},
		{New(PermissionDenied, "x"), sc{403, "FORBIDDEN"}},
		{New(NotFound, "x"), sc{404, "NOT_FOUND"}},
		{New(MethodNotAllowed, "x"), sc{405, "METHOD_NOT_ALLOWED"}},
		{New(Conflict, "x"), sc{409, "RESOURCE_CONFLICT"}},
		{WithCode(Conflict, CodeAgentDeleting, "x"), sc{409, "AGENT_DELETING"}},
		{New(PreconditionFailed, "x"), sc{412, "PRECONDITION_FAILED"}},
		{New(TooLarge, "x"), sc{413, "PAYLOAD_TOO_LARGE"}},
		{New(UnsupportedMedia, "x"), sc{415, "UNSUPPORTED_MEDIA_TYPE"}},
		{New(TooManyRequests, "x"), sc{429, "TOO_MANY_REQUESTS"}},
		{New(Internal, "x"), sc{500, "INTERNAL_ERROR"}},
		{New(NotImplemented, "x"), sc{501, "NOT_IMPLEMENTED"}},
		{New(Unavailable, "x"), sc{503, "DEPENDENCY_UNAVAILABLE"}},
		{New(OutcomeUnknown, "x"), sc{503, "UNKNOWN_OUTCOME"}},
	}
	for _, tc := range tests {
		got := sc{tc.err.Status(), tc.err.PublicCode()}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("kind %d (-want +got):\n%s", tc.err.Kind, diff)
		}
	}
}

func TestKindThroughWrapping(t *testing.T) {
	cause := errors.New("driver said no")
	err := fmt.Errorf("loading: %w", Wrap(Unavailable, "The database is unavailable.", cause))
	if KindOf(err) != Unavailable || !Is(err, Unavailable) || !errors.Is(err, cause) {
		t.Fatalf("KindOf(%v) = %v; want Unavailable with the cause reachable", err, KindOf(err))
	}
	if KindOf(errors.New("plain")) != Internal || Is(nil, Internal) {
		t.Fatal("unclassified errors must be Internal and nil must be no kind")
	}
}

func TestCodesByStatus(t *testing.T) {
	got := CodesByStatus()
	want := map[int][]string{
		400: {CodeInvalidRequest}, 401: {CodeUnauthenticated}, 403: {CodeForbidden}, 404: {CodeNotFound},
		405: {CodeMethodNotAllowed},
		409: {CodeAgentDeleting, CodeInstallationExists, CodeNamespaceNotEmpty, CodeNamespaceNotReady, CodeResourceConflict},
		412: {CodePreconditionFailed}, 413: {CodePayloadTooLarge}, 415: {CodeUnsupportedMedia}, 429: {CodeTooManyRequests},
		500: {CodeInternal}, 501: {CodeNotImplemented}, 503: {CodeUnavailable, CodeUnknownOutcome},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CodesByStatus (-want +got):\n%s", diff)
	}
}

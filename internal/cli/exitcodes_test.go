package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/clientconfig"
)

func TestAPIErrorExitCodes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"unauthenticated", &client.Error{Status: 401, Code: "UNAUTHENTICATED"}, exitAuth},
		{"forbidden", &client.Error{Status: 403, Code: "FORBIDDEN"}, exitAuth},
		{"not found", &client.Error{Status: 404, Code: "NOT_FOUND"}, exitNotFound},
		{"conflict", &client.Error{Status: 409, Code: "RESOURCE_CONFLICT"}, exitConflict},
		{"precondition", &client.Error{Status: 412, Code: "PRECONDITION_FAILED"}, exitConflict},
		{"invalid", &client.Error{Status: 400, Code: "INVALID_REQUEST"}, exitUsage},
		{"too large", &client.Error{Status: 413, Code: "PAYLOAD_TOO_LARGE"}, exitUsage},
		{"throttled sign-in", &client.Error{Status: 429, Code: "TOO_MANY_REQUESTS"}, exitRuntime},
		{"unknown outcome", &client.Error{Status: 503, Code: "UNKNOWN_OUTCOME"}, exitUnknownOutcome},
		{"unavailable", &client.Error{Status: 503, Code: "DEPENDENCY_UNAVAILABLE"}, exitRuntime},
		{"internal", &client.Error{Status: 500, Code: "INTERNAL_ERROR"}, exitRuntime},
		{"proxy page", &client.Error{Status: 502, Code: "HTTP_502"}, exitRuntime},
		{"refused", fmt.Errorf("client: GET /x: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), exitUnreachable},
		{"other", errors.New("disk full"), exitRuntime},
		{"already classified", notFoundError("no Agent named %q", "x"), exitNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ee *exitError
			if err := apiError(tt.err); !errors.As(err, &ee) || ee.code != tt.want {
				t.Errorf("apiError(%v) = %v; want exit %d", tt.err, err, tt.want)
			}
		})
	}
	if got := apiError(&client.Error{Status: 404, Code: "NOT_FOUND", Message: "not found", RequestID: "req_1"}).Error(); got != "not found [NOT_FOUND, request req_1]" {
		t.Errorf("message = %q", got)
	}
	var ee *exitError
	if err := authError(clientconfig.ErrNoContext); !errors.As(err, &ee) || ee.code != exitAuth {
		t.Errorf("not logged in = %v", err)
	}
}

// TestExitCodesDocumented: docs/cli.md has the table of exit codes, one
// row per code, in order.
func TestExitCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for i, c := range exitCodes {
		if c.Code != i {
			t.Errorf("exitCodes[%d] has code %d; the table must list 0, 1, 2, … in order", i, c.Code)
		}
		row := fmt.Sprintf("| %d | %s |", c.Code, c.Meaning)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/cli.md lacks the row %q", row)
		}
	}
}

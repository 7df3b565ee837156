package cli

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/digest"
)

// TestReadContentLimit: occ files put reads at most 1 MiB of content, from
// standard input or a file; one byte more is a usage error, never content
// cut to size.
func TestReadContentLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, n int) string { return sizedFile(t, dir, name, "f", n) }
	type result struct {
		Len  int
		Exit int // 0: read
		Msg  string
	}
	tooLarge := result{Exit: exitUsage, Msg: "the content is larger than 1048576 bytes; a workspace file holds at most 16,384"}
	tests := []struct {
		name, path, stdin string
		want              result
	}{
		{"stdin at the limit", "-", strings.Repeat("s", maxFileBytes), result{Len: maxFileBytes}},
		{"stdin one past", "-", strings.Repeat("s", maxFileBytes+1), tooLarge},
		{"file at the limit", file("at", maxFileBytes), "", result{Len: maxFileBytes}},
		{"file one past", file("past", maxFileBytes+1), "", tooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, err := readContent(deps{stdin: strings.NewReader(tc.stdin)}, tc.path)
			got := result{Len: len(content)}
			var ee *exitError
			if errors.As(err, &ee) {
				got.Exit, got.Msg = ee.code, ee.err.Error()
			} else if err != nil {
				t.Fatalf("readContent: %v, want an exit error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readContent (-want +got):\n%s", diff)
			}
		})
	}
}

// sizedFile writes n copies of fill to dir/name (mode 0600) and returns
// its path: the inputs of the size limit tests.
func sizedFile(t *testing.T, dir, name, fill string, n int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Repeat(fill, n)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPutFileOutcomes: occ files put (and edit) on every kind of answer
// to its one PUT, against a stand-in for OCC. It never sends the write
// twice. When the write may have landed (OCC's UNKNOWN_OUTCOME, a proxy's
// 502 or 504 without OCC's envelope, a reply lost, an interrupt after the
// request went out) it reads the file back: the hash it wrote means
// applied (exit 0), any other is exit 6. When nothing was written (OCC's
// own 503, a refused connection) it reports the error and reads nothing.
func TestPutFileOutcomes(t *testing.T) {
	const content = "mine\n"
	mine := digest.Of(content)
	other := digest.Of("theirs\n")
	type result struct {
		Exit       int // 0: success
		Puts, Gets int
	}
	tests := []struct {
		name string
		// put answers the PUT; it may block until the request ends.
		put      func(w http.ResponseWriter, r *http.Request, interrupt func())
		readBack string // the hash the read-back GET finds
		want     result
	}{
		{"written", func(w http.ResponseWriter, r *http.Request, _ func()) {
			w.Header().Set("ETag", `"`+mine+`"`)
			envelope(w, 200, `{"data":{"name":"SOUL.md","size":5,"hash":"`+mine+`"}}`)
		}, "", result{Puts: 1}},
		{"OCC's unknown outcome, applied", func(w http.ResponseWriter, r *http.Request, _ func()) {
			envelope(w, 503, `{"error":{"code":"UNKNOWN_OUTCOME","message":"m"}}`)
		}, mine, result{Puts: 1, Gets: 1}},
		{"OCC's unknown outcome, not applied", func(w http.ResponseWriter, r *http.Request, _ func()) {
			envelope(w, 503, `{"error":{"code":"UNKNOWN_OUTCOME","message":"m"}}`)
		}, other, result{Exit: exitUnknownOutcome, Puts: 1, Gets: 1}},
		{"a proxy's 504, applied", func(w http.ResponseWriter, r *http.Request, _ func()) {
			w.WriteHeader(http.StatusGatewayTimeout)
		}, mine, result{Puts: 1, Gets: 1}},
		{"a proxy's 502, not applied", func(w http.ResponseWriter, r *http.Request, _ func()) {
			w.WriteHeader(http.StatusBadGateway)
		}, other, result{Exit: exitUnknownOutcome, Puts: 1, Gets: 1}},
		{"the reply lost", func(w http.ResponseWriter, r *http.Request, _ func()) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}, other, result{Exit: exitUnknownOutcome, Puts: 1, Gets: 1}},
		{"interrupted after the request went out", func(w http.ResponseWriter, r *http.Request, interrupt func()) {
			interrupt()
			<-r.Context().Done()
		}, mine, result{Puts: 1, Gets: 1}},
		{"OCC's dependency unavailable: nothing written", func(w http.ResponseWriter, r *http.Request, _ func()) {
			envelope(w, 503, `{"error":{"code":"DEPENDENCY_UNAVAILABLE","message":"m"}}`)
		}, "", result{Exit: exitRuntime, Puts: 1}},
		{"a conflict", func(w http.ResponseWriter, r *http.Request, _ func()) {
			envelope(w, 412, `{"error":{"code":"PRECONDITION_FAILED","message":"m","data":{"currentHash":"`+other+`"}}}`)
		}, "", result{Exit: exitConflict, Puts: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			var got result
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				switch r.Method {
				case http.MethodPut:
					got.Puts++
				case http.MethodGet:
					got.Gets++
				}
				mu.Unlock()
				if r.Method == http.MethodGet {
					w.Header().Set("ETag", `"`+tc.readBack+`"`)
					envelope(w, 200, `{"data":{"name":"SOUL.md","content":"x"}}`)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				tc.put(w, r, interrupt)
			}))
			defer srv.Close()
			got.Exit = putOnce(t, ctx, srv.URL, content)
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("occ files put (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("the server's TLS certificate refused: nothing written", func(t *testing.T) {
		// The server's certificate is its own, which the client (system
		// roots) does not trust: the handshake fails before the request
		// goes out, so there is nothing to read back.
		var puts, gets atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodPut:
				puts.Add(1)
			case http.MethodGet:
				gets.Add(1)
			}
		}))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake, logged by the server
		srv.StartTLS()
		defer srv.Close()
		got := result{Exit: putOnce(t, context.Background(), srv.URL, content), Puts: int(puts.Load()), Gets: int(gets.Load())}
		if diff := cmp.Diff(result{Exit: exitUnreachable}, got); diff != "" {
			t.Errorf("occ files put (-want +got):\n%s", diff)
		}
	})
	t.Run("connection refused: nothing written", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		if got := putOnce(t, context.Background(), url, content); got != exitUnreachable {
			t.Errorf("exit %d, want %d", got, exitUnreachable)
		}
	})
}

// putOnce runs putFile against url and returns its exit code (0: success).
func putOnce(t *testing.T, ctx context.Context, url, content string) int {
	t.Helper()
	c, err := client.New(url, client.WithServiceKey("k"), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cn := &conn{d: deps{stderr: io.Discard}, c: c}
	_, err = cn.putFile(ctx, "ns_x", "agt_x", "SOUL.md", content, "")
	if err == nil {
		return 0
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		t.Fatalf("putFile = %v, not an exit error", err)
	}
	return ee.code
}

// envelope writes an API reply with its status.
func envelope(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// TestReadInputLimits: the other inputs read from files (a Configuration
// document, an initial persona file) are bounded the same way: at most
// 1 MiB, one byte more is a usage error naming the input, never input cut
// to size.
func TestReadInputLimits(t *testing.T) {
	dir := t.TempDir()
	doc := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(`"`+strings.Repeat("d", n-2)+`"`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exitOf := func(err error) (int, string) {
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code, ee.err.Error()
		}
		if err != nil {
			t.Fatalf("not an exit error: %v", err)
		}
		return 0, ""
	}
	b, err := readDocument(deps{}, doc("at.json", maxFileBytes))
	if code, _ := exitOf(err); code != 0 || len(b) != maxFileBytes {
		t.Errorf("a document at the limit: %d bytes, exit %d", len(b), code)
	}
	_, err = readDocument(deps{}, doc("past.json", maxFileBytes+1))
	if code, msg := exitOf(err); code != exitUsage || msg != "the document is larger than 1048576 bytes; a Configuration document holds at most 48 KiB" {
		t.Errorf("a document past the limit: exit %d, %q", code, msg)
	}
	_, err = readDocument(deps{stdin: strings.NewReader(`"` + strings.Repeat("d", maxFileBytes) + `"`)}, "-")
	if code, _ := exitOf(err); code != exitUsage {
		t.Errorf("a document past the limit on standard input: exit %d, want a usage error, not JSON cut short", code)
	}

	persona := t.TempDir()
	sizedFile(t, persona, "SOUL.md", "s", maxFileBytes)
	files, err := readPersonaDir(persona)
	if code, _ := exitOf(err); code != 0 || len(files["SOUL.md"]) != maxFileBytes {
		t.Errorf("a persona file at the limit: %d bytes, exit %d", len(files["SOUL.md"]), code)
	}
	sizedFile(t, persona, "USER.md", "u", maxFileBytes+1)
	_, err = readPersonaDir(persona)
	if code, msg := exitOf(err); code != exitUsage || msg != "USER.md is larger than 1048576 bytes; an initial file holds at most 16,384" {
		t.Errorf("a persona file past the limit: exit %d, %q", code, msg)
	}
}

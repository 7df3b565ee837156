package cli

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/clientconfig"
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
		// A redirect is an answer: the server refused the write (the
		// client follows no redirect), so there is nothing to read back.
		{"a redirect: refused", func(w http.ResponseWriter, r *http.Request, _ func()) {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusTemporaryRedirect)
		}, other, result{Exit: exitRuntime, Puts: 1}},
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
	// Failures before the request was written that are neither a dial
	// error nor a refused certificate: nothing reached OCC, so the
	// command exits 7 without a read-back, as for a refused connection.
	t.Run("TLS handshake with a plain-HTTP server: nothing written", func(t *testing.T) {
		var requests atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) }))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.Start()
		defer srv.Close()
		got := result{Exit: putOnce(t, context.Background(), "https://"+srv.Listener.Addr().String(), content), Gets: int(requests.Load())}
		if diff := cmp.Diff(result{Exit: exitUnreachable}, got); diff != "" {
			t.Errorf("occ files put (-want +got):\n%s", diff)
		}
	})
	t.Run("the proxy refuses the connection: nothing written", func(t *testing.T) {
		proxy := httptest.NewServer(http.NotFoundHandler())
		proxyURL, _ := url.Parse(proxy.URL)
		proxy.Close()
		via := client.WithHTTPClient(&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}})
		if got := putOnce(t, context.Background(), "http://occ.invalid", content, via); got != exitUnreachable {
			t.Errorf("exit %d, want %d", got, exitUnreachable)
		}
	})
}

// putOnce runs putFile against url and returns its exit code (0: success).
func putOnce(t *testing.T, ctx context.Context, url, content string, opts ...client.Option) int {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithServiceKey("k"), client.WithTimeout(10 * time.Second)}, opts...)...)
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

// TestFilesPutIfMatch: --if-match, once given, must be a file hash. An
// empty value (an unset shell variable) or anything but 64 lowercase hex
// digits exits 2 before any request, never turning into an unconditional
// write, also beside --if-unchanged; a valid hash goes out as If-Match.
func TestFilesPutIfMatch(t *testing.T) {
	hash := digest.Of("theirs\n")
	var mu sync.Mutex
	var requests []string // method and If-Match of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.Header.Get("If-Match"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"`+hash+`"`)
		if r.Method == http.MethodGet {
			envelope(w, 200, `{"data":{"name":"SOUL.md","content":"theirs\n"}}`)
			return
		}
		envelope(w, 200, `{"data":{"name":"SOUL.md","size":5}}`)
	}))
	defer srv.Close()
	file := sizedFile(t, t.TempDir(), "SOUL.md", "m", 5)
	type result struct {
		Exit     int
		Requests []string
		Refusal  bool // stderr says the value is not a file hash
	}
	tests := []struct {
		name  string
		flags []string
		want  result
	}{
		{"empty", []string{"--if-match", ""}, result{Exit: exitUsage, Refusal: true}},
		{"empty with --if-match=", []string{"--if-match="}, result{Exit: exitUsage, Refusal: true}},
		{"empty beside --if-unchanged", []string{"--if-match", "", "--if-unchanged"}, result{Exit: exitUsage}},
		{"uppercase", []string{"--if-match", strings.ToUpper(hash)}, result{Exit: exitUsage, Refusal: true}},
		{"cut short", []string{"--if-match", hash[:63]}, result{Exit: exitUsage, Refusal: true}},
		{"quoted", []string{"--if-match", `"` + hash + `"`}, result{Exit: exitUsage, Refusal: true}},
		{"a hash", []string{"--if-match", hash}, result{Requests: []string{`PUT "` + hash + `"`}}},
		{"--if-unchanged", []string{"--if-unchanged"}, result{Requests: []string{"GET ", `PUT "` + hash + `"`}}},
		{"neither: last write wins", nil, result{Requests: []string{"PUT "}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			requests = nil
			mu.Unlock()
			h := harness{env: clientEnv(t, map[string]clientconfig.Context{"main": keyContext(srv.URL)})}
			args := append([]string{"files", "put", "agt_x", "SOUL.md", "-f", file}, tc.flags...)
			got := result{Exit: h.run(t, args...), Refusal: strings.Contains(h.stder.String(), "is not a file hash")}
			mu.Lock()
			got.Requests = requests
			mu.Unlock()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s\nstderr: %s", args, diff, h.stder.String())
			}
		})
	}
}

// TestFilesEditRefusals: files edit answers only a 412 (someone saved
// first) with its diff and overwrite prompt. A 409 (the Agent is stopping
// or being deleted) would refuse the overwrite too: it exits 5 with the
// server's own message, keeps your version, and neither reads the file
// again nor offers to overwrite.
func TestFilesEditRefusals(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // where a kept copy stays
	theirs := digest.Of("theirs\n")
	type result struct {
		Exit       int
		Puts, Gets int
		Prompted   bool // the "changed on the server" diff and prompt
		Kept       bool // "Your version is kept in …"
		Says       bool // stderr holds says: the server's message, or the abort
	}
	tests := []struct {
		name, put, says string
		status          int
		want            result
	}{
		{"409 not writable while stopping", `{"error":{"code":"RESOURCE_CONFLICT","message":"the Agent is not writable while stopping"}}`,
			"the Agent is not writable while stopping", 409, result{Exit: exitConflict, Puts: 1, Gets: 1, Kept: true, Says: true}},
		{"409 being deleted", `{"error":{"code":"AGENT_DELETING","message":"the Agent is being deleted"}}`,
			"the Agent is being deleted", 409, result{Exit: exitConflict, Puts: 1, Gets: 1, Kept: true, Says: true}},
		{"412 someone saved first", `{"error":{"code":"PRECONDITION_FAILED","message":"m","data":{"currentHash":"` + theirs + `"}}}`,
			"SOUL.md: aborted; nothing was written", 412, result{Exit: exitConflict, Puts: 1, Gets: 2, Prompted: true, Kept: true, Says: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got result
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				defer mu.Unlock()
				if r.Method == http.MethodGet {
					got.Gets++
					w.Header().Set("ETag", `"`+theirs+`"`)
					envelope(w, 200, `{"data":{"name":"SOUL.md","content":"theirs\n"}}`)
					return
				}
				got.Puts++
				envelope(w, tc.status, tc.put)
			}))
			defer srv.Close()
			env := clientEnv(t, map[string]clientconfig.Context{"main": keyContext(srv.URL)})
			env["EDITOR"] = `printf 'mine\n' >`                     // runs as: printf 'mine\n' > "$1"
			h := harness{env: env, stdin: strings.NewReader("a\n")} // abort, if asked
			exit := h.run(t, "files", "edit", "agt_x", "SOUL.md")
			stderr := h.stder.String()
			mu.Lock()
			defer mu.Unlock()
			got.Exit = exit
			got.Prompted = strings.Contains(stderr, "changed on the server since you opened it") || strings.Contains(stderr, "[o]verwrite")
			got.Kept = strings.Contains(stderr, "Your version is kept in")
			got.Says = strings.Contains(stderr, tc.says)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("files edit, PUT answered %d (-want +got):\n%s\nstderr: %s", tc.status, diff, stderr)
			}
		})
	}
}

// TestLocalReadFailures: the exit code of a local input that cannot be
// read follows docs/cli.md's table, the same for every reader and
// whether open or read fails: a path that names nothing is a bad
// argument (2); a file that is there but cannot be read (a directory,
// which opens and then fails to read; a symbolic link loop, or permission
// denied, which fail to open) or standard input that fails is a local
// file error (1).
func TestLocalReadFailures(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	persona := t.TempDir()
	if err := os.Mkdir(filepath.Join(persona, "SOUL.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop") // opening it fails with ELOOP, for root too
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	failing := deps{stdin: io.MultiReader(strings.NewReader("x"), brokenReader{})}
	tests := []struct {
		name string
		read func() error
		want int
	}{
		{"content: missing file", func() error { _, err := readContent(deps{}, missing); return err }, exitUsage},
		{"content: a directory", func() error { _, err := readContent(deps{}, dir); return err }, exitRuntime},
		{"content: a symbolic link loop", func() error { _, err := readContent(deps{}, loop); return err }, exitRuntime},
		{"content: standard input fails", func() error { _, err := readContent(failing, "-"); return err }, exitRuntime},
		{"document: missing file", func() error { _, err := readDocument(deps{}, missing); return err }, exitUsage},
		{"document: a directory", func() error { _, err := readDocument(deps{}, dir); return err }, exitRuntime},
		{"persona file: a directory", func() error { _, err := readPersonaDir(persona); return err }, exitRuntime},
		{"key file: missing", func() error { _, err := readSecretFile(missing); return err }, exitUsage},
		{"key file: a directory", func() error { _, err := readSecretFile(dir); return err }, exitRuntime},
		{"key file: a symbolic link loop", func() error { _, err := readSecretFile(loop); return err }, exitRuntime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read()
			var ee *exitError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: error %v, want an exit error", tc.name, err)
			}
			if ee.code != tc.want {
				t.Errorf("%s: exit %d (%v), want %d", tc.name, ee.code, err, tc.want)
			}
		})
	}
}

// brokenReader fails every read, like a standard input whose pipe
// broke.
type brokenReader struct{}

func (brokenReader) Read([]byte) (int, error) { return 0, errors.New("input/output error") }

package client_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/testutil"
)

// TestPathParametersEscapedOnce: a path parameter arrives escaped exactly
// once, as one segment ("a b/c" as a%20b%2Fc, never a%2520b%252Fc), also
// under a server URL with an escaped path prefix of its own.
func TestPathParametersEscapedOnce(t *testing.T) {
	ctx := testutil.Context(t)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("ETag", `"h"`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"name":"SOUL.md","content":""}}`)
	}))
	defer srv.Close()
	tests := []struct {
		name, prefix, ns, agent, file string
		want                          string
	}{
		{"plain ids", "", "ns_x", "agt_x", "SOUL.md", "/namespaces/ns_x/agents/agt_x/workspace/files/SOUL.md"},
		{"space, slash, question mark, percent", "", "a b/c", "agt?x%y", "SO UL.md",
			"/namespaces/a%20b%2Fc/agents/agt%3Fx%25y/workspace/files/SO%20UL.md"},
		{"under an escaped path prefix", "/pre%20fix", "a b/c", "agt_x", "SOUL.md",
			"/pre%20fix/namespaces/a%20b%2Fc/agents/agt_x/workspace/files/SOUL.md"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			c, err := client.New(srv.URL + tc.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.GetFile(ctx, tc.ns, tc.agent, tc.file); err != nil {
				t.Fatalf("GetFile(%q, %q, %q): %v", tc.ns, tc.agent, tc.file, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Errorf("GetFile(%q, %q, %q): escaped paths received (-want +got):\n%s", tc.ns, tc.agent, tc.file, diff)
			}
		})
	}
}

// TestNotSent: a transport failure before any of the request was written
// (refused connection, a proxy that cannot be reached, a TLS handshake
// with a plain-HTTP server, a context already ended) matches ErrNotSent;
// one after the request went out (the connection closed before a reply,
// no reply before the deadline) never does, since a write may have been
// applied. The error still unwraps to the transport's own.
func TestNotSent(t *testing.T) {
	ctx := testutil.Context(t)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()

	plain := httptest.NewUnstartedServer(http.NotFoundHandler())
	plain.Config.ErrorLog = log.New(io.Discard, "", 0)
	plain.Start()
	defer plain.Close()

	var reached atomic.Int32
	closes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer closes.Close()
	hangs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		// With the body read, the server notices the client hanging up
		// and ends r's context, so Close does not wait for ever.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer hangs.Close()

	ended, cancel := context.WithCancel(ctx)
	cancel()
	// Only the last case gets this far, soon after this line.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	type result struct {
		NotSent    bool
		URLError   bool // errors.As(err, *url.Error): the transport's error is kept
		Deadline   bool
		HTTPStatus int // a *client.Error's status; 0: none
	}
	tests := []struct {
		name string
		url  string
		opts []client.Option
		ctx  context.Context
		want result
	}{
		{"connection refused", refusedURL, nil, ctx, result{NotSent: true, URLError: true}},
		{"the proxy refuses the connection", "http://occ.invalid",
			[]client.Option{client.WithHTTPClient(&http.Client{Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) {
				return url.Parse(refusedURL)
			}}})}, ctx, result{NotSent: true, URLError: true}},
		{"TLS handshake with a plain-HTTP server", "https://" + plain.Listener.Addr().String(), nil, ctx,
			result{NotSent: true, URLError: true}},
		{"the context ended before the call", closes.URL, nil, ended, result{NotSent: true, URLError: true}},
		{"the connection closed after the request", closes.URL, nil, ctx, result{URLError: true}},
		{"no reply before the deadline", hangs.URL, nil, short, result{URLError: true, Deadline: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(tc.url, append([]client.Option{client.WithServiceKey("occk_k")}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.PutFile(tc.ctx, "ns_x", "agt_x", "SOUL.md", "x", "")
			if err == nil {
				t.Fatal("PutFile succeeded; want a transport error")
			}
			got := result{NotSent: errors.Is(err, client.ErrNotSent), URLError: errors.As(err, new(*url.Error)),
				Deadline: errors.Is(err, context.DeadlineExceeded)}
			var ce *client.Error
			if errors.As(err, &ce) {
				got.HTTPStatus = ce.Status
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PutFile against %s = %v (-want +got):\n%s", tc.name, err, diff)
			}
		})
	}
	if reached.Load() == 0 {
		t.Error("no request reached the servers that read it; the cases after the request went out tested nothing")
	}
}

// TestRedirectIsADefiniteAnswer: a 3xx is an *Error with code
// HTTP_<status> (a reply, if not OCC's), not a transport failure, and not
// ErrNotSent: the request did reach a server, which refused it.
func TestRedirectIsADefiniteAnswer(t *testing.T) {
	ctx := testutil.Context(t)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "req_r")
			http.Redirect(w, r, "https://elsewhere.example/x", code)
		}))
		c, _ := client.New(srv.URL, client.WithServiceKey("occk_k"))
		_, _, err := c.PutFile(ctx, "ns_x", "agt_x", "SOUL.md", "x", "")
		srv.Close()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != code || ce.Code != "HTTP_"+strconv.Itoa(code) ||
			ce.RequestID != "req_r" || !strings.Contains(ce.Message, "https://elsewhere.example/x") || errors.Is(err, client.ErrNotSent) {
			t.Errorf("PutFile answered %d = %#v, want a *client.Error HTTP_%d naming the Location, request req_r", code, err, code)
		}
	}
}

// TestWaitPollTimeout: in WaitForDeployment and WaitForReconciliation each
// poll is bounded by the client's request timeout as well as by the
// caller's context: a GET that never answers ends the wait after the
// request timeout with ErrPollTimeout (and context.DeadlineExceeded),
// while the caller's context still has time. When the caller's context
// ends first, that is its own deadline, not ErrPollTimeout.
func TestWaitPollTimeout(t *testing.T) {
	// The first poll answers "running", every later one hangs.
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if polls.Add(1) > 1 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/reconciliations/") {
			_, _ = io.WriteString(w, `{"data":{"id":"rec_1","namespaceId":"ns_x","status":"running"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"data":{"id":"dep_1","status":"running"}}`)
	}))
	defer srv.Close()
	waits := map[string]func(context.Context, *client.Client) error{
		"deployment": func(ctx context.Context, c *client.Client) error {
			_, err := c.WaitForDeployment(ctx, "ns_x", "agt_x", "dep_1", 100*time.Millisecond, nil)
			return err
		},
		"reconciliation": func(ctx context.Context, c *client.Client) error {
			_, err := c.WaitForReconciliation(ctx, "ns_x", "rec_1", 100*time.Millisecond)
			return err
		},
	}
	type result struct {
		PollTimeout, Deadline, CallerTimeLeft bool
	}
	tests := []struct {
		name              string
		request, deadline time.Duration
		want              result
	}{
		{"a poll times out first", 300 * time.Millisecond, 20 * time.Second,
			result{PollTimeout: true, Deadline: true, CallerTimeLeft: true}},
		{"the caller's deadline comes first", time.Minute, 500 * time.Millisecond,
			result{Deadline: true}},
	}
	for _, tc := range tests {
		for what, wait := range waits {
			t.Run(tc.name+"/"+what, func(t *testing.T) {
				polls.Store(0)
				c, err := client.New(srv.URL, client.WithServiceKey("occk_k"), client.WithTimeout(tc.request))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(testutil.Context(t), tc.deadline)
				defer cancel()
				err = wait(ctx, c)
				got := result{PollTimeout: errors.Is(err, client.ErrPollTimeout), Deadline: errors.Is(err, context.DeadlineExceeded),
					CallerTimeLeft: ctx.Err() == nil}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("WaitFor %s = %v (-want +got):\n%s", what, err, diff)
				}
			})
		}
	}
}

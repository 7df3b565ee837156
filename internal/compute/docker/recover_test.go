package docker

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/testutil"
)

// TestRecoverWithASilentEngine: occ starts while the Docker engine accepts
// connections on its socket and answers nothing (a wedged dockerd).
// Recover, which runs at start on a context without a deadline, gives up
// on each Agent after recoverAgentTimeout (shortened here) and logs it, so
// occ's start is not held for ever. The silent engine is a fake socket in
// this process: a real engine cannot be made to do this on purpose (the
// package's other tests run against the real one).
func TestRecoverWithASilentEngine(t *testing.T) {
	prev := recoverAgentTimeout
	recoverAgentTimeout = time.Second
	t.Cleanup(func() { recoverAgentTimeout = prev })

	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// Reads the requests and answers nothing.
	testutil.Serve(t, l, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })

	var logs bytes.Buffer
	d, err := New(Options{DataDir: t.TempDir(), Config: Config{Host: "unix://" + sock},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.c.Close() })
	agents := []string{ids.New(ids.Agent), ids.New(ids.Agent)}
	for _, a := range agents {
		h := hostDir{agentdir.Dir(filepath.Join(d.root, agentdir.Hash(a)))}
		if err := os.MkdirAll(h.Path(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := h.Ensure(agentdir.Info{AgentID: a, NamespaceID: ids.New(ids.Namespace)}); err != nil {
			t.Fatal(err)
		}
		if err := h.writeServing(ids.New(ids.Revision), 1); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Recover(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Recover = %v; want each Agent's failure logged, not an error", err)
		}
	case <-ctx.Done():
		t.Fatal("Recover still waiting on the silent engine after a minute")
	}
	if n := strings.Count(logs.String(), "docker: recover agent"); n != len(agents) {
		t.Errorf("%d recover failures logged, want %d:\n%s", n, len(agents), logs.String())
	}
}

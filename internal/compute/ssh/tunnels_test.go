package ssh

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sshdSoftNoFile is the soft open-files limit sshd typically runs under
// (systemd's default LimitNOFILE is 1024:524288), which the process of
// each connection inherits; it holds one socket for each direct-tcpip
// channel of the connection.
const sshdSoftNoFile = 1024

// TestTunnelBudgetFitsSshdFileLimit, against the real sshd whose
// per-connection process (the login shell's parent) is given the usual
// soft limit of 1,024 open files: all maxTunnels tunnels of a host open
// at once over its one SSH connection, and the most command sessions occ
// may open beside them (maxSessions at its maximum, 64) still run. With
// maxTunnels 1,024 the channels past ~1,010 were refused by sshd ("Too
// many open files") instead of waiting for a slot, as the budget
// promises.
func TestTunnelBudgetFitsSshdFileLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSessions = 64
	d, err := New(Options{Config: cfg, Binary: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := h.run(ctx, "limit", shellCmd(`prlimit --pid "$PPID" --nofile=$1: && grep '^Max open files' /proc/$PPID/limits`, strconv.Itoa(sshdSoftNoFile)), nil)
	if err != nil {
		t.Fatalf("lower the soft open-files limit of the connection's sshd: %v", err)
	}
	t.Logf("the connection's sshd: %s", strings.Join(strings.Fields(string(out)), " "))

	// A gateway stand-in on the host's loopback (the test sshd is local):
	// it accepts and holds every connection.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var accepted []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
		}
	}()
	defer func() {
		l.Close()
		mu.Lock()
		for _, c := range accepted {
			c.Close()
		}
		mu.Unlock()
	}()
	port := l.Addr().(*net.TCPAddr).Port

	var tunnels []net.Conn
	defer func() {
		for _, c := range tunnels {
			c.Close()
		}
	}()
	for i := range maxTunnels {
		c, err := h.dialLoopback(ctx, port)
		if err != nil {
			t.Fatalf("tunnel %d of %d: %v", i+1, maxTunnels, err)
		}
		tunnels = append(tunnels, c)
	}

	// Every session slot in use beside them, all at once: each command
	// waits until all have started, then counts the open files of the
	// connection's sshd.
	barrier := t.TempDir()
	script := `touch "$1/$$"; i=0
while [ "$(ls "$1" | wc -l)" -lt "$2" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
ls /proc/$PPID/fd | wc -l`
	type result struct {
		files int
		err   error
	}
	results := make(chan result, cfg.MaxSessions)
	for range cfg.MaxSessions {
		go func() {
			out, err := h.run(ctx, "wait", shellCmd(script, barrier, strconv.Itoa(cfg.MaxSessions)), nil)
			n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
			results <- result{n, err}
		}()
	}
	peak := 0
	for range cfg.MaxSessions {
		r := <-results
		if r.err != nil {
			t.Errorf("a command beside %d tunnels: %v", maxTunnels, r.err)
		}
		peak = max(peak, r.files)
	}
	t.Logf("the connection's sshd held up to %d open files with %d tunnels and %d commands", peak, maxTunnels, cfg.MaxSessions)
	if room := sshdSoftNoFile - peak; room < 64 {
		t.Errorf("%d open files left under the limit of %d; want room for the token reader, kills and more", room, sshdSoftNoFile)
	}
}

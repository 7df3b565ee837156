package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/openclaw/occ/internal/compute/agentdir"
)

// portTable records which Agent directory owns which port, for every
// Driver in this process. It is process-wide so that two drivers over
// different DataDirs (tests, mostly) never hand out the same port; a probe
// bind catches ports taken by anything else on the host.
type portTable struct {
	mu     sync.Mutex
	owners map[int]string // port → agent directory
}

var ports = &portTable{owners: map[int]string{}}

// claim records dir as the owner of p unless another directory has it.
func (t *portTable) claim(p int, dir string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if owner, ok := t.owners[p]; ok && owner != dir {
		return false
	}
	t.owners[p] = dir
	return true
}

// release forgets every port of dir.
func (t *portTable) release(dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, owner := range t.owners {
		if owner == dir {
			delete(t.owners, p)
		}
	}
}

// releasePort forgets p if dir owns it.
func (t *portTable) releasePort(p int, dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owners[p] == dir {
		delete(t.owners, p)
	}
}

// reservePersistedPorts claims the ports already written in Agent
// directories, so that new Agents never get them while their gateways are
// down.
func (d *Driver) reservePersistedPorts() {
	entries, err := os.ReadDir(d.agentsDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(d.agentsDir, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, agentdir.FilePort))
		if err != nil {
			continue
		}
		p, err := strconv.Atoi(string(trimSpace(b)))
		if err != nil || !d.inRange(p) {
			continue
		}
		if !ports.claim(p, dir) {
			d.log.Warn("local: port recorded by two agents; one will get a new port at its next start", "port", p, "dir", dir)
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (d *Driver) inRange(p int) bool { return p >= d.o.PortRange[0] && p <= d.o.PortRange[1] }

var errNoPort = errors.New("local: no free port left in the port range")

// ensurePort returns the Agent's port, assigning and persisting one when
// it has none (or one outside the configured range, or one another Agent
// holds). It takes the Agent's port lock: the supervisor moves the port
// of a restarting gateway without the Agent's lock (startPort).
func (d *Driver) ensurePort(a *agent) (int, error) {
	a.portMu.Lock()
	defer a.portMu.Unlock()
	return d.ensurePortLocked(a)
}

func (d *Driver) ensurePortLocked(a *agent) (int, error) {
	p, err := a.files().Port()
	if err != nil {
		return 0, fmt.Errorf("local: read port: %w", err)
	}
	if p != 0 && d.inRange(p) && ports.claim(p, a.dir) {
		return p, nil
	}
	return d.assignPort(a, p)
}

// startPort returns the port the Agent's next gateway must listen on. It
// is called just before every start, the supervisor's restarts included,
// when no gateway of this Agent runs: the persisted port (ensurePort) if
// it can be bound now, else a new one, persisted, so that the Endpoint
// (read from the port file) moves with it and never names a port another
// process took while the gateway was down. The caller updates the
// rendered configuration. Errors (no free port, the port file unwritable)
// leave the persisted port as it was; the caller counts a failed start.
//
// The check cannot reserve the port: another process can still bind it
// before the gateway does. The gateway then exits ("address in use") and
// the next restart checks again.
func (d *Driver) startPort(a *agent) (int, error) {
	a.portMu.Lock()
	defer a.portMu.Unlock()
	p, err := d.ensurePortLocked(a)
	if err != nil {
		return 0, err
	}
	if portBindable(p) {
		return p, nil
	}
	d.log.Warn("local: agent port is taken by another process; assigning a new one", "agent", a.id, "port", p)
	return d.assignPort(a, p)
}

// assignPort picks the first port in range that no Agent owns and that
// can be bound, claims and persists it, and releases old. The caller holds
// a.portMu.
func (d *Driver) assignPort(a *agent, old int) (int, error) {
	for p := d.o.PortRange[0]; p <= d.o.PortRange[1]; p++ {
		if p == old || !ports.claim(p, a.dir) {
			continue
		}
		if !portBindable(p) {
			ports.releasePort(p, a.dir)
			continue
		}
		if err := a.files().WritePort(p); err != nil {
			ports.releasePort(p, a.dir)
			return 0, err
		}
		if old != 0 {
			ports.releasePort(old, a.dir)
		}
		return p, nil
	}
	return 0, errNoPort
}

// portBindable reports whether a listener could be opened on
// 127.0.0.1:p right now. The gateway also listens on [::1]:p, so that is
// checked too where IPv6 loopback exists.
func portBindable(p int) bool {
	l, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	l6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(p)))
	if err != nil {
		// No IPv6 loopback on this host is fine; "address in use" is not.
		return !errors.Is(err, syscall.EADDRINUSE)
	}
	l6.Close()
	return true
}

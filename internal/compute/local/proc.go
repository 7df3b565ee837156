package local

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/compute/agentdir"
)

// Everything here reads /proc: the driver runs gateways on Linux only.
// Nothing reads another process's memory or secrets; the environment read
// is the gateway's own, which by construction holds no secret.

// procStat is what the driver needs from /proc/<pid>/stat.
type procStat struct {
	state byte   // R, S, D, Z, ...
	ppid  int    // parent
	pgrp  int    // process group
	start uint64 // start time in clock ticks since boot: with the pid, a process's identity
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may contain
	// anything, so parse from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, fmt.Errorf("local: /proc/%d/stat is malformed", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state), f[2] field 5 (pgrp), f[19] field 22 (starttime).
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("local: /proc/%d/stat is short", pid)
	}
	ppid, err0 := strconv.Atoi(f[1])
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("local: /proc/%d/stat is malformed", pid)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, nil
}

// procAlive reports whether pid is still the process that started at
// start (0: any) and has not exited (a zombie has exited).
func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := readProcStat(pid)
	if err != nil {
		return false
	}
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	return start == 0 || st.start == start
}

func procCmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	var args []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s = strings.TrimSpace(s); s != "" {
			args = append(args, s)
		}
	}
	return args
}

// isGatewayCmdline recognizes an OpenClaw gateway's command line. The
// gateway replaces its process title early ("openclaw", then
// "openclaw-gateway"), so the original arguments (and with them the
// configuration path) are not visible for long; until then it is
// `<node> <openclaw.mjs> gateway run ...`. Its helper processes (spawn
// broker, sqlite worker) run other scripts and do not match.
func isGatewayCmdline(args []string, rt Runtime) bool {
	if len(args) == 0 {
		return false
	}
	if args[0] == "openclaw" || args[0] == "openclaw-gateway" || strings.HasPrefix(args[0], "openclaw-gateway ") {
		return true
	}
	return len(args) >= 3 && args[1] == rt.OpenClaw && args[2] == "gateway"
}

// procEnv returns one variable of pid's initial environment.
func procEnv(pid int, key string) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	prefix := key + "="
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, prefix); ok {
			return v, true
		}
	}
	return "", false
}

func procCwd(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return ""
	}
	return p
}

// pidFile is the Agent's pid file: which process runs which revision.
type pidFile struct {
	PID      int    `json:"pid"`
	Start    uint64 `json:"start"`
	Revision string `json:"revision"`
	Port     int    `json:"port"`
}

func (a *agent) readPIDFile() (pidFile, bool) {
	var pf pidFile
	b, err := os.ReadFile(a.path(filePID))
	if err != nil || json.Unmarshal(b, &pf) != nil || pf.PID <= 0 {
		return pidFile{}, false
	}
	return pf, true
}

func (a *agent) writePIDFile(pf pidFile) error {
	b, err := json.Marshal(pf)
	if err != nil {
		return err
	}
	return agentdir.WriteFileAtomic(a.path(filePID), b, 0o600)
}

// removePIDFile removes the pid file if it still names pid.
func (a *agent) removePIDFile(pid int) {
	if pf, ok := a.readPIDFile(); ok && pf.PID != pid {
		return
	}
	if err := os.Remove(a.path(filePID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.d.log.Warn("local: remove pid file", "agent", a.id, "error", err)
	}
}

// identify checks that pid is this Agent's gateway: alive with the
// recorded start time, a gateway command line, working directory the
// Agent's directory (the driver starts every gateway there). It returns
// the revision it runs, from OPENCLAW_CONFIG_PATH ("" if that revision's
// directory is gone).
func (a *agent) identify(pid int, start uint64) (rev string, ok bool) {
	if !procAlive(pid, start) || !isGatewayCmdline(procCmdline(pid), a.d.o.Runtime) || procCwd(pid) != a.dir {
		return "", false
	}
	if cfg, found := procEnv(pid, "OPENCLAW_CONFIG_PATH"); found {
		rev, _ = a.revisionOfConfig(cfg)
	}
	return rev, true
}

// findRunning returns the Agent's live gateway named by its pid file, or
// nil; a stale pid file is removed.
func (a *agent) findRunning() (*procHandle, pidFile, error) {
	pf, ok := a.readPIDFile()
	if !ok {
		return nil, pidFile{}, nil
	}
	rev, alive := a.identify(pf.PID, pf.Start)
	if !alive {
		a.removePIDFile(pf.PID)
		return nil, pidFile{}, nil
	}
	if pf.Start == 0 {
		st, err := readProcStat(pf.PID)
		if err != nil {
			return nil, pidFile{}, nil
		}
		pf.Start = st.start
	}
	pf.Revision = rev
	return newAdopted(pf.PID, pf.Start), pf, nil
}

// scanGateways lists the live gateway processes whose working directory
// is under agentsDir, by directory. It finds gateways whose pid file was
// lost (a crash between spawn and writing it) so Recover adopts them
// instead of starting a duplicate. A gateway's helpers are forked from it
// and show its process title until they exec, so a candidate whose parent
// is a candidate in the same directory is a helper, not a gateway.
func scanGateways(agentsDir string, rt Runtime) map[string][]int {
	type cand struct {
		dir  string
		ppid int
	}
	cands := map[int]cand{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd := procCwd(pid)
		if cwd == "" || filepath.Dir(cwd) != agentsDir || !isGatewayCmdline(procCmdline(pid), rt) {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		cands[pid] = cand{dir: cwd, ppid: st.ppid}
	}
	out := map[string][]int{}
	for pid, c := range cands {
		if parent, ok := cands[c.ppid]; ok && parent.dir == c.dir {
			continue
		}
		out[c.dir] = append(out[c.dir], pid)
	}
	return out
}

// listenerOwned reports whether a TCP socket listening on port belongs to
// pid, and whether the check could be made at all. It tells our gateway
// apart from whatever else might answer on the port.
func listenerOwned(pid, port int) (owned, checked bool) {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(f, port, inodes)
	}
	if len(inodes) == 0 {
		if _, err := os.Stat("/proc/net/tcp"); err != nil {
			return false, false
		}
		return false, true
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false, false
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return true, true
		}
	}
	return false, true
}

// listeningInodes adds the inodes of sockets in LISTEN state (0A) on port
// from one /proc/net/tcp* table.
func listeningInodes(path string, port int, into map[string]bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
			continue
		}
		into[fields[9]] = true
	}
}

// waitGone polls until pid (with start) is gone or d passes.
func waitGone(pid int, start uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for procAlive(pid, start) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

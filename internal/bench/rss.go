package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openclaw/occ/internal/store/sqlstore"
)

// RSS is a resident-memory reading of a real `occ server` process.
type RSS struct {
	Name     string
	RSS, HWM int64 // bytes: current and peak (VmRSS, VmHWM)
	// Anon and File split RSS (RssAnon, RssFile): the process's own
	// memory, and the pages of the occ binary (and other files) mapped
	// from the page cache. File varies by several MB between runs of one
	// binary, with how the kernel cached the file, not with what OCC did.
	Anon, File int64
}

// ServerRSS starts the occ binary as `occ server` on SQLite twice: on an
// empty data directory (idle after start), and on one seeded with sc
// (after start, then after reading every Agent list page and 1,000
// Agents). Each process is stopped with SIGTERM (killed after 10 s).
func ServerRSS(ctx context.Context, occBin, workDir string, sc Scale) ([]RSS, error) {
	var out []RSS
	empty := filepath.Join(workDir, "rss-empty")
	p, err := startServer(ctx, occBin, empty)
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // let start-up garbage be collected
	r, err := p.rss("occ server idle after start, empty")
	p.stop()
	if err != nil {
		return nil, err
	}
	out = append(out, r)

	seeded := filepath.Join(workDir, "rss-seeded")
	st, err := sqlstore.Open(ctx, "", seeded)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	bigNS, agents, err := seed(ctx, st, sc)
	st.Close()
	if err != nil {
		return nil, err
	}
	p, err = startServer(ctx, occBin, seeded)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	time.Sleep(2 * time.Second)
	r, err = p.rss(fmt.Sprintf("occ server idle after start, %d Agents", len(agents)))
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	c := &http.Client{Timeout: 30 * time.Second}
	ck, err := signIn(ctx, c, p.base, p.base)
	if err != nil {
		return nil, err
	}
	e := &apiEnv{base: p.base, cookie: ck, client: c, bigNS: bigNS, agents: agents}
	if _, err := e.apiScenarios(ctx); err != nil { // walks half the Agent list
		return nil, err
	}
	for i := range min(1000, len(agents)) {
		if _, err := e.get(ctx, "/namespaces/"+bigNS+"/agents/"+agents[i]); err != nil {
			return nil, err
		}
	}
	r, err = p.rss(fmt.Sprintf("occ server after list pages and 1,000 GETs, %d Agents", len(agents)))
	if err != nil {
		return nil, err
	}
	return append(out, r), nil
}

type serverProc struct {
	cmd  *exec.Cmd
	base string
}

// startServer runs `occ server` on SQLite in dataDir on a free loopback
// port, with the bench administrator's password from a file, and waits
// (at most 60 s) for /readyz.
func startServer(ctx context.Context, occBin, dataDir string) (*serverProc, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	pw := filepath.Join(dataDir, "..", filepath.Base(dataDir)+"-password")
	if err := os.WriteFile(pw, []byte(benchPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(occBin, "server", "--data-dir", dataDir, "--listen", addr,
		"--bootstrap-admin-email", benchEmail, "--bootstrap-admin-password-file", pw)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, base: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			break
		}
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("occ server on %s did not become ready within 60 s", addr)
}

func (p *serverProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// rss reads VmRSS, VmHWM, RssAnon and RssFile of the process from /proc.
func (p *serverProc) rss(name string) (RSS, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return RSS{}, err
	}
	defer f.Close()
	r := RSS{Name: name}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		dst := map[string]*int64{"VmRSS": &r.RSS, "VmHWM": &r.HWM, "RssAnon": &r.Anon, "RssFile": &r.File}[k]
		if !ok || dst == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return RSS{}, err
		}
		*dst = kb << 10
	}
	return r, sc.Err()
}

// BurstRSS is what SignInBurstRSS reports: RSS before a burst of sign-ins,
// the highest RSS sampled during it, 10 s after it, and how long after the
// burst RSS first read under 100 MB (-1: not within the 10 s).
type BurstRSS struct {
	SignIns, Failed     int
	Before, Peak, After int64 // bytes
	Burst, UnderLimitAt time.Duration
	RetriedBusy         int
}

// burstLimit is issue 15's bound on RSS 10 s after a burst of sign-ins.
const burstLimit = 100e6

// SignInBurstRSS starts `occ server` on a SQLite data directory holding 8
// users besides the administrator and signs them in n times in all, from
// 8 concurrent clients, one user each (each sign-in hashes with argon2id,
// 64 MiB), sampling VmRSS every 50 ms from
// before the burst until 10 s after it. A sign-in the server answers 503
// (every hashing slot busy past its wait) is retried after its
// Retry-After, at most 20 times; the burst is bounded by 5 minutes.
func SignInBurstRSS(ctx context.Context, occBin, workDir string, n int) (BurstRSS, error) {
	// One user per client: concurrent attempts on one account count
	// against its sign-in throttle until they succeed (internal/authn),
	// so eight clients on one account would be answered 429. The users
	// are created on a first server, whose hashing garbage goes with it.
	const clients = 8
	dir := filepath.Join(workDir, "rss-burst")
	p, err := startServer(ctx, occBin, dir)
	if err != nil {
		return BurstRSS{}, err
	}
	err = createBurstUsers(ctx, p.base, clients)
	p.stop()
	if err != nil {
		return BurstRSS{}, err
	}
	p, err = startServer(ctx, occBin, dir)
	if err != nil {
		return BurstRSS{}, err
	}
	defer p.stop()
	time.Sleep(2 * time.Second)
	var out BurstRSS
	before, err := p.rss("before")
	if err != nil {
		return out, err
	}
	out.SignIns, out.Before, out.Peak = n, before.RSS, before.RSS

	sampleCtx, stopSampling := context.WithCancel(ctx)
	var mu sync.Mutex
	type sample struct {
		at  time.Time
		rss int64
	}
	var samples []sample
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
			if r, err := p.rss(""); err == nil {
				mu.Lock()
				samples = append(samples, sample{time.Now(), r.RSS})
				mu.Unlock()
			}
		}
	}()

	burstCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var next, failed, busy atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 60 * time.Second}
			for burstCtx.Err() == nil && next.Add(1) <= int64(n) {
				ok := false
				for range 20 {
					code, err := signInStatus(burstCtx, c, p.base, burstEmail(client))
					if err == nil && code == http.StatusServiceUnavailable {
						busy.Add(1)
						time.Sleep(time.Second)
						continue
					}
					ok = err == nil && code == http.StatusOK
					break
				}
				if !ok {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	out.Burst = end.Sub(start)
	out.Failed, out.RetriedBusy = int(failed.Load()), int(busy.Load())
	select {
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	stopSampling()
	<-sampled
	after, err := p.rss("after")
	if err != nil {
		return out, err
	}
	out.After, out.UnderLimitAt = after.RSS, -1
	mu.Lock()
	defer mu.Unlock()
	for _, s := range samples {
		out.Peak = max(out.Peak, s.rss)
		if s.at.After(end) && s.rss < burstLimit && out.UnderLimitAt < 0 {
			out.UnderLimitAt = s.at.Sub(end)
		}
	}
	return out, nil
}

// signInStatus signs the bench administrator in once and returns the
// status code.
func signInStatus(ctx context.Context, c *http.Client, base, email string) (int, error) {
	body := fmt.Sprintf(`{"email":%q,"password":%q}`, email, benchPassword)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/auth/sign-in/email", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

func burstEmail(i int) string { return fmt.Sprintf("burst-%d@bench.example", i) }

// createBurstUsers signs the administrator in and creates n users with the
// bench password.
func createBurstUsers(ctx context.Context, base string, n int) error {
	c := &http.Client{Timeout: 60 * time.Second}
	ck, err := signIn(ctx, c, base, base)
	if err != nil {
		return err
	}
	for i := range n {
		body := fmt.Sprintf(`{"email":%q,"password":%q}`, burstEmail(i), benchPassword)
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/iam/users", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		req.AddCookie(ck)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("create user %d: status %d", i, resp.StatusCode)
		}
	}
	return nil
}

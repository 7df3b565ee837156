package worker_test

// This file tests the worker across operating-system processes on one
// PostgreSQL database: the guarantees that matter for replicas (one claim
// per item, one run per Agent at a time, lease takeover after a crash)
// only show up when the workers share nothing but the database. The test
// binary is its own worker process: TestMain turns into a child worker when
// OCC_WORKER_CHILD=1.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/worker"
)

// Environment of a child worker process.
const (
	envChild     = "OCC_WORKER_CHILD"            // "1" turns the test binary into a worker
	envChildMode = "OCC_WORKER_CHILD_MODE"       // a key of childModes
	envChildDB   = "OCC_TEST_POSTGRES_URL_CHILD" // the parent's database
	envChildLog  = "OCC_WORKER_CHILD_LOG"        // the driver call log shared by all processes
)

// Child modes.
const (
	modeRace  = "race"  // slow-ish calls, so that both racers get work
	modeBlock = "block" // PrepareRevision blocks until the process is killed
)

// Timing. The race's delays make a deployment take ~30 ms of driver time,
// long enough that two workers always overlap in time and short enough
// that 200 deployments take seconds.
const (
	racePrepare  = 20 * time.Millisecond
	raceActivate = 5 * time.Millisecond
	raceRetire   = 2 * time.Millisecond
	raceLease    = 3 * time.Second
	killLease    = 2 * time.Second
	blockPrepare = 5 * time.Minute        // "forever" for a child that is killed
	childPoll    = 50 * time.Millisecond  // workers' idle poll
	waitPoll     = 200 * time.Millisecond // the parent's progress poll
	raceWaitMax  = 3 * time.Minute        // bound on the race's completion
	childStopMax = 15 * time.Second       // how long a signalled child may take to exit
	childMaxLife = 4 * time.Minute        // backstop: an orphaned child never outlives a run
)

// The race's shape: 50 Agents, 10 with initial workspace files, four
// deployments each.
const (
	raceAgents  = 50
	raceSetups  = 10
	raceDeploys = 4
)

// Driver call log vocabulary.
const (
	methodPrep   = "PrepareRevision"
	methodAct    = "ActivateRevision"
	methodRetire = "RetireRevision"
	phaseEnter   = "enter"
	phaseExit    = "exit"
	setupPending = "pending"   // the call carried a setup with files
	setupDone    = "completed" // the call carried a completed setup
	// logLineLimit: a write(2) of less than this to an O_APPEND file is
	// appended whole, never interleaved with another process's.
	logLineLimit = 4 << 10
)

const (
	testOrigin   = "http://occ.test"
	testTimeZone = "America/New_York" // as testdb: SQL that leans on UTC must not pass by luck
	adminEmail   = "admin@example.com"
	initialFiles = `{"AGENTS.md":"# Agent\n","SOUL.md":"calm"}` // a valid initialWorkspaceFiles value
)

// childMode is how a child worker behaves.
type childMode struct {
	lease time.Duration
	delay map[string]time.Duration // per logged verb
}

var childModes = map[string]childMode{
	modeRace:  {lease: raceLease, delay: map[string]time.Duration{methodPrep: racePrepare, methodAct: raceActivate, methodRetire: raceRetire}},
	modeBlock: {lease: killLease, delay: map[string]time.Duration{methodPrep: blockPrepare}},
}

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childMain runs a worker over the database in envChildDB until SIGTERM,
// until its standard input closes (the parent died), or until
// childMaxLife.
func childMain() int {
	mode, ok := childModes[os.Getenv(envChildMode)]
	if !ok {
		fmt.Fprintf(os.Stderr, "child worker: unknown mode %q\n", os.Getenv(envChildMode))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, childMaxLife)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	st, err := sqlstore.Open(ctx, os.Getenv(envChildDB), "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "child worker: open store: %v\n", err)
		return 1
	}
	defer st.Close()
	rec, err := openRecorder(os.Getenv(envChildLog), mode.delay)
	if err != nil {
		fmt.Fprintf(os.Stderr, "child worker: %v\n", err)
		return 1
	}
	defer rec.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Logger: logger, Driver: rec,
		Worker: worker.Options{Lease: mode.lease, Poll: childPoll}})
	if err := srv.Worker.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "child worker: run: %v\n", err)
		return 1
	}
	return 0
}

// callLine is one line of the driver call log.
type callLine struct {
	PID      int    `json:"pid"`
	Method   string `json:"method"`
	Agent    string `json:"agent"`
	Revision string `json:"revision"`
	Number   int64  `json:"number"`
	Setup    string `json:"setup,omitempty"`
	TNS      int64  `json:"t_ns"`
	Phase    string `json:"phase"`
}

// recorder is a compute.Driver that appends a line to a log shared by every
// process on each entry to and exit from PrepareRevision, ActivateRevision
// and RetireRevision, sleeping its configured delay in between. The file is
// opened O_APPEND and each line is one write(2) below 4 KiB, so lines from
// different processes never interleave and the file order is the real order
// of the writes: a process's "exit" written before it commits an activation
// precedes the "enter" of whoever claims the next item. The checks rely on
// that order rather than on the timestamps.
type recorder struct {
	pid   int
	f     *os.File
	delay map[string]time.Duration
}

var _ compute.Driver = (*recorder)(nil)

func openRecorder(path string, delay map[string]time.Duration) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open call log: %w", err)
	}
	return &recorder{pid: os.Getpid(), f: f, delay: delay}, nil
}

func (r *recorder) Close() error { return r.f.Close() }

func (r *recorder) log(method, phase string, rev compute.Revision, rc *compute.RevisionContext) error {
	l := callLine{PID: r.pid, Method: method, Agent: rev.AgentID, Revision: rev.ID, Number: rev.Number,
		TNS: time.Now().UnixNano(), Phase: phase}
	if rc != nil && rc.WorkspaceSetup != nil {
		l.Setup = setupDone
		if !rc.WorkspaceSetup.Completed && len(rc.WorkspaceSetup.Files) > 0 {
			l.Setup = setupPending
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(b) >= logLineLimit {
		return fmt.Errorf("call log line of %d bytes would not be appended atomically", len(b))
	}
	_, err = r.f.Write(b)
	return err
}

// call logs entry, waits the verb's delay (or until ctx ends), and logs
// exit even when ctx ended, so that every completed call has both lines.
func (r *recorder) call(ctx context.Context, method string, rev compute.Revision, rc *compute.RevisionContext) error {
	if err := r.log(method, phaseEnter, rev, rc); err != nil {
		return err
	}
	var err error
	if d := r.delay[method]; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-t.C:
		}
		t.Stop()
	}
	return errors.Join(err, r.log(method, phaseExit, rev, rc))
}

func (r *recorder) ID() string { return "recorder" }
func (r *recorder) Capabilities() compute.Capabilities {
	return compute.Capabilities{WorkspaceSetup: true}
}
func (r *recorder) EnsureNamespace(context.Context, compute.Namespace) error { return nil }
func (r *recorder) DeleteNamespace(context.Context, compute.Namespace) error { return nil }
func (r *recorder) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := r.call(ctx, methodPrep, rev, &rc); err != nil {
		return compute.PrepareResult{}, err
	}
	return compute.PrepareResult{Ready: true}, nil
}
func (r *recorder) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	return r.call(ctx, methodAct, rev, &rc)
}
func (r *recorder) StopRevision(context.Context, compute.Revision) error { return nil }
func (r *recorder) RetireRevision(ctx context.Context, rev compute.Revision) error {
	return r.call(ctx, methodRetire, rev, nil)
}
func (r *recorder) DeleteAgent(context.Context, compute.Agent) error { return nil }
func (r *recorder) Endpoint(context.Context, compute.Revision) (compute.Endpoint, error) {
	return compute.Endpoint{}, compute.ErrNoEndpoint
}

// readCalls parses the call log. A torn last line (a writer killed
// mid-write) is dropped; anything else unparsable fails the test.
func readCalls(t *testing.T, path string) []callLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read call log: %v", err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
		b = b[:i+1]
	}
	var out []callLine
	for line := range bytes.Lines(b) {
		var l callLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("call log line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// fixture is one assembled OCC server on a real store with a bootstrapped
// administrator, a ready Namespace and one Configuration.
type fixture struct {
	srv   *server.Server
	st    store.Store     // the unwrapped store, for checks that bypass authorization
	admin context.Context // carries the administrator as a session user
	ns    store.Namespace
	cfg   store.Configuration
}

// newFixture builds the server over st (wrapped first by wrap when non-nil)
// and prepares the Namespace by running the in-process worker: Deploy needs
// a ready Namespace.
func newFixture(tb testing.TB, ctx context.Context, st store.Store, wrap func(store.Store) store.Store,
	d compute.Driver, wo worker.Options) *fixture {
	tb.Helper()
	inner := st
	if wrap != nil {
		inner = wrap(st)
	}
	// The domain shares the worker's clock (nil: the real one), so work ages
	// as the worker sees it.
	srv := server.New(server.Options{Store: inner, PublicOrigin: testOrigin, Driver: d, Now: wo.Now, Worker: wo})
	f := &fixture{srv: srv, st: st, admin: bootstrapAdmin(tb, ctx, srv, st)}
	var err error
	if f.ns, err = srv.Service.CreateNamespace(f.admin, "workers"); err != nil {
		tb.Fatalf("CreateNamespace: %v", err)
	}
	// The Namespace's reconcile is the only queued item; a couple of passes
	// is plenty, the bound only stops a broken worker from looping.
	for range 5 {
		if f.ns, err = st.GetNamespace(ctx, f.ns.ID); err != nil {
			tb.Fatalf("GetNamespace: %v", err)
		}
		if f.ns.Status == store.NamespaceReady {
			break
		}
		if _, err := srv.Worker.RunOnce(ctx); err != nil {
			tb.Fatalf("RunOnce (namespace): %v", err)
		}
	}
	if f.ns.Status != store.NamespaceReady {
		tb.Fatalf("Namespace status %q after the worker ran; want %q", f.ns.Status, store.NamespaceReady)
	}
	f.cfg, err = srv.Service.CreateConfiguration(f.admin, f.ns.ID, occ.ConfigurationInput{
		Name: "base", Kind: store.ConfigurationKindAgent, Document: json.RawMessage(`{"agents":{}}`)})
	if err != nil {
		tb.Fatalf("CreateConfiguration: %v", err)
	}
	return f
}

// bootstrapAdmin creates the administrator on srv's store st and returns
// ctx carrying it as a session user.
func bootstrapAdmin(tb testing.TB, ctx context.Context, srv *server.Server, st store.Store) context.Context {
	tb.Helper()
	pw := filepath.Join(tb.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("correct horse battery staple\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if created, err := srv.Service.Bootstrap(ctx, occ.BootstrapInput{AdminEmail: adminEmail, PasswordFile: pw}); err != nil || !created {
		tb.Fatalf("Bootstrap: created=%v err=%v", created, err)
	}
	u, err := st.GetUserByEmail(ctx, adminEmail)
	if err != nil {
		tb.Fatalf("GetUserByEmail(%s): %v", adminEmail, err)
	}
	return authz.WithSubject(ctx, &authz.Subject{ID: u.ID, Kind: authz.KindUser, Credential: "session"})
}

// agent creates an Agent, with initial workspace files when files is set.
func (f *fixture) agent(tb testing.TB, name string, files bool) store.Agent {
	tb.Helper()
	in := occ.AgentInput{Name: name, ConfigurationID: f.cfg.ID}
	if files {
		in.InitialWorkspaceFiles = json.RawMessage(initialFiles)
	}
	a, err := f.srv.Service.CreateAgent(f.admin, f.ns.ID, in)
	if err != nil {
		tb.Fatalf("CreateAgent(%s): %v", name, err)
	}
	return a
}

func (f *fixture) deploy(tb testing.TB, a store.Agent) store.Revision {
	tb.Helper()
	rev, err := f.srv.Service.Deploy(f.admin, f.ns.ID, a.ID)
	if err != nil {
		tb.Fatalf("Deploy(%s): %v", a.Name, err)
	}
	return rev
}

// childURL is the URL of st's PostgreSQL database, for a child process:
// testdb owns the database's lifecycle (clone, drop with FORCE, sweep), and
// only the name is needed to point OCC_TEST_POSTGRES_URL at it.
func childURL(t *testing.T, ctx context.Context, st *sqlstore.Store) string {
	t.Helper()
	var name string
	if err := st.DB().QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatalf("current_database: %v", err)
	}
	u, err := url.Parse(os.Getenv(testdb.EnvPostgresURL))
	if err != nil {
		t.Fatalf("%s is not a valid URL", testdb.EnvPostgresURL) // the error would quote the password
	}
	u.Path, u.RawPath = "/"+name, ""
	q := u.Query()
	q.Set("timezone", testTimeZone)
	u.RawQuery = q.Encode()
	return u.String()
}

// child is a running child worker process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // held open: the child exits when it closes
	stderr bytes.Buffer   // read only after done
	done   chan struct{}
	err    error // Wait's result, set before done closes
}

// startChild starts a worker process in mode over dbURL, logging driver
// calls to logPath. Cleanup kills it if the test left it running and shows
// its standard error when the test failed.
func startChild(t *testing.T, mode, dbURL, logPath string) *child {
	t.Helper()
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), envChild+"=1", envChildMode+"="+mode, envChildDB+"="+dbURL, envChildLog+"="+logPath)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatalf("child stdin: %v", err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start child worker: %v", err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() && c.stderr.Len() > 0 {
			t.Logf("child worker %d (%s) stderr:\n%s", c.cmd.Process.Pid, mode, c.stderr.String())
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited reports whether the process ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig and waits at most childStopMax for the exit; it returns
// Wait's error.
func (c *child) signal(t *testing.T, sig os.Signal) error {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil && !c.exited() {
		t.Fatalf("signal child %d: %v", c.pid(), err)
	}
	select {
	case <-c.done:
		return c.err
	case <-time.After(childStopMax):
		t.Fatalf("child worker %d did not exit within %v of %v", c.pid(), childStopMax, sig)
		return nil
	}
}

// TestTwoWorkerProcessesRace races two worker processes over 200
// deployments of 50 Agents (four each, queued before the workers start) on
// one PostgreSQL database. It proves, from the driver call log both
// processes append to and from the database: every revision is activated
// exactly once; both processes took part; no Agent ever has two
// Prepare/Activate calls in flight at once, in any process; each Agent's
// calls come in revision order; each Agent ends on its newest revision;
// and initial workspace files are delivered with the first activation and
// cleared by it.
func TestTwoWorkerProcessesRace(t *testing.T) {
	st := testdb.Postgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), raceWaitMax+time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "calls.jsonl")
	rec, err := openRecorder(logPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	f := newFixture(t, ctx, st, nil, rec, worker.Options{})

	// Four deployments per Agent, created back to back: each Agent's next
	// item is then the oldest claimable one the moment its predecessor
	// finishes, so both workers contend for the same Agent all the time.
	agents := make([]store.Agent, raceAgents)
	hasSetup := map[string]bool{}
	revs := map[string][]store.Revision{} // by Agent id, in number order
	for i := range agents {
		agents[i] = f.agent(t, fmt.Sprintf("agent-%02d", i), i < raceSetups)
		hasSetup[agents[i].ID] = i < raceSetups
		for range raceDeploys {
			revs[agents[i].ID] = append(revs[agents[i].ID], f.deploy(t, agents[i]))
		}
	}
	total := raceAgents * raceDeploys

	start := time.Now()
	dbURL := childURL(t, ctx, st)
	children := []*child{startChild(t, modeRace, dbURL, logPath), startChild(t, modeRace, dbURL, logPath)}

	// Wait until every deployment finished, bounded; a failed or cancelled
	// deployment, or a child that died, ends the wait at once.
	pending := map[string]store.Revision{}
	for _, rs := range revs {
		for _, r := range rs {
			pending[r.ID] = r
		}
	}
	deadline := time.Now().Add(raceWaitMax)
	for len(pending) > 0 {
		for id := range pending {
			w, err := st.GetWorkByKey(ctx, occ.DeploymentWorkKey(id))
			if err != nil {
				t.Fatalf("GetWorkByKey(%s): %v", id, err)
			}
			switch w.State {
			case store.WorkSucceeded:
				delete(pending, id)
			case store.WorkFailedPermanent, store.WorkCancelled:
				t.Fatalf("deployment %s ended %s (%s: %s); want succeeded", id, w.State, w.ReasonCode, w.LastError)
			}
		}
		if len(pending) == 0 {
			break
		}
		for _, c := range children {
			if c.exited() {
				t.Fatalf("child worker %d exited early: %v", c.pid(), c.err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deployments not succeeded after %v", len(pending), total, raceWaitMax)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for deployments: %v", ctx.Err())
		case <-time.After(waitPoll):
		}
	}
	elapsed := time.Since(start)
	for _, c := range children {
		if err := c.signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("child worker %d after SIGTERM: %v; want a clean exit", c.pid(), err)
		}
	}
	t.Logf("%d deployments by 2 worker processes in %v", total, elapsed.Round(time.Millisecond))

	calls := readCalls(t, logPath)
	checkRaceCalls(t, calls, children, revs, hasSetup)

	// The database agrees: each Agent serves its newest revision, each
	// deployment succeeded on its first claim (no item was claimed twice),
	// and every setup was completed with its files cleared.
	for _, a := range agents {
		got, err := st.GetAgent(ctx, f.ns.ID, a.ID)
		if err != nil {
			t.Fatalf("GetAgent(%s): %v", a.Name, err)
		}
		rs := revs[a.ID]
		if newest := rs[len(rs)-1]; got.ActiveRevisionID != newest.ID {
			t.Errorf("Agent %s: active revision %q; want its newest, %q (number %d)", a.Name, got.ActiveRevisionID, newest.ID, newest.Number)
		}
		for _, r := range rs {
			d, err := f.srv.Service.GetDeployment(f.admin, f.ns.ID, a.ID, r.ID)
			if err != nil {
				t.Fatalf("GetDeployment(%s #%d): %v", a.Name, r.Number, err)
			}
			if d.Status != occ.DeploymentSucceeded {
				t.Errorf("GetDeployment(%s #%d).Status = %q; want %q", a.Name, r.Number, d.Status, occ.DeploymentSucceeded)
			}
			w, err := st.GetWorkByKey(ctx, occ.DeploymentWorkKey(r.ID))
			if err != nil {
				t.Fatalf("GetWorkByKey(%s #%d): %v", a.Name, r.Number, err)
			}
			if w.Attempts != 1 {
				t.Errorf("deployment %s #%d: %d attempts; want 1 (claimed once)", a.Name, r.Number, w.Attempts)
			}
		}
		setup, err := st.GetWorkspaceSetup(ctx, f.ns.ID, a.ID)
		switch {
		case !hasSetup[a.ID]:
			if !errkind.Is(err, errkind.NotFound) {
				t.Errorf("GetWorkspaceSetup(%s) without initial files: %+v, %v; want NotFound", a.Name, setup, err)
			}
		case err != nil:
			t.Errorf("GetWorkspaceSetup(%s): %v", a.Name, err)
		case !setup.Completed || len(setup.Files) != 0:
			t.Errorf("GetWorkspaceSetup(%s): completed=%v with %d files; want completed with none", a.Name, setup.Completed, len(setup.Files))
		}
	}
}

// checkRaceCalls checks the call log of the race; see
// TestTwoWorkerProcessesRace.
func checkRaceCalls(t *testing.T, calls []callLine, children []*child, revs map[string][]store.Revision, hasSetup map[string]bool) {
	t.Helper()
	racers := map[int]bool{}
	for _, c := range children {
		racers[c.pid()] = true
	}
	activations := map[string]int{}           // enter lines by revision
	activationsBy := map[int]int{}            // by process
	order := map[string][]int64{}             // activated numbers by Agent, in log order
	last := map[string]int64{}                // highest number called so far, by Agent
	inflight := map[string]map[int]callLine{} // by Agent, then process: calls entered, not exited
	for i, l := range calls {
		if !racers[l.PID] {
			t.Errorf("call log line %d: %s by process %d, which is not a racing worker", i, l.Method, l.PID)
			continue
		}
		open := inflight[l.Agent]
		if open == nil {
			open = map[int]callLine{}
			inflight[l.Agent] = open
		}
		if l.Phase == phaseExit {
			if o, ok := open[l.PID]; !ok || o.Method != l.Method || o.Revision != l.Revision {
				t.Errorf("call log line %d: exit of %s #%d by %d without its entry (open: %+v)", i, l.Method, l.Number, l.PID, o)
			}
			delete(open, l.PID)
			continue
		}
		for pid, o := range open {
			t.Errorf("Agent %s: %s #%d by %d entered while %s #%d by %d was in flight (line %d); want one run per Agent at a time",
				l.Agent, l.Method, l.Number, l.PID, o.Method, o.Number, pid, i)
		}
		open[l.PID] = l
		if l.Method == methodRetire {
			continue
		}
		if l.Number < last[l.Agent] {
			t.Errorf("Agent %s: %s #%d by %d after a call for #%d (line %d); want revision order", l.Agent, l.Method, l.Number, l.PID, last[l.Agent], i)
		}
		last[l.Agent] = max(last[l.Agent], l.Number)
		if l.Method == methodAct {
			activations[l.Revision]++
			activationsBy[l.PID]++
			order[l.Agent] = append(order[l.Agent], l.Number)
			want := ""
			if hasSetup[l.Agent] {
				want = setupDone
				if l.Number == 1 {
					want = setupPending
				}
			}
			if l.Setup != want {
				t.Errorf("Agent %s: ActivateRevision #%d carried setup %q; want %q", l.Agent, l.Number, l.Setup, want)
			}
		}
	}
	for agent, open := range inflight {
		for pid, o := range open {
			t.Errorf("Agent %s: %s #%d by %d never exited", agent, o.Method, o.Number, pid)
		}
	}
	for agentID, rs := range revs {
		var want []int64
		for _, r := range rs {
			want = append(want, r.Number)
			if n := activations[r.ID]; n != 1 {
				t.Errorf("revision %s (Agent %s #%d): %d ActivateRevision calls; want exactly 1", r.ID, agentID, r.Number, n)
			}
		}
		if !slices.Equal(order[agentID], want) {
			t.Errorf("Agent %s: activations in order %v; want %v", agentID, order[agentID], want)
		}
	}
	for _, c := range children {
		if activationsBy[c.pid()] == 0 {
			t.Errorf("child worker %d activated nothing; want both workers to take part (activations by process: %v)", c.pid(), activationsBy)
		}
	}
	t.Logf("activations by process: %v; driver calls logged: %d", activationsBy, len(calls)/2)
}

// claimSpy records every ClaimWork call that reaches the store.
type claimSpy struct {
	store.Store
	mu     sync.Mutex
	claims []claimRecord
}

type claimRecord struct {
	now  time.Time
	ok   bool
	item string
}

func (s *claimSpy) ClaimWork(ctx context.Context, c store.Claim) (store.WorkItem, bool, error) {
	w, ok, err := s.Store.ClaimWork(ctx, c)
	if err == nil {
		s.mu.Lock()
		s.claims = append(s.claims, claimRecord{now: c.Now, ok: ok, item: w.ID})
		s.mu.Unlock()
	}
	return w, ok, err
}

func (s *claimSpy) records() []claimRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.claims)
}

// TestKilledWorkerLeaseTakeover kills a worker process with SIGKILL while
// it is inside PrepareRevision and proves that the deployment is neither
// lost nor taken over early: until the dead worker's lease expires nothing
// is claimable (checked at the store with a clock just before expiry, and
// by the real in-process worker); after it, the in-process worker claims
// the item and finishes it, as the deployment's second attempt, with the
// pending workspace setup delivered and completed exactly once.
func TestKilledWorkerLeaseTakeover(t *testing.T) {
	st := testdb.Postgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "calls.jsonl")
	rec, err := openRecorder(logPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	spy := &claimSpy{}
	f := newFixture(t, ctx, st, func(s store.Store) store.Store { spy.Store = s; return spy }, rec,
		worker.Options{Lease: 10 * time.Second, Poll: childPoll})
	a := f.agent(t, "victim", true)
	rev := f.deploy(t, a)

	c := startChild(t, modeBlock, childURL(t, ctx, st), logPath)
	// Wait, bounded, for the child to be inside PrepareRevision.
	entered := false
	for deadline := time.Now().Add(30 * time.Second); !entered && time.Now().Before(deadline); {
		for _, l := range readCalls(t, logPath) {
			entered = entered || (l.PID == c.pid() && l.Method == methodPrep && l.Phase == phaseEnter)
		}
		if c.exited() {
			t.Fatalf("child worker exited before preparing: %v", c.err)
		}
		if !entered {
			time.Sleep(20 * time.Millisecond) // polling the log file: there is nothing to wait on
		}
	}
	if !entered {
		t.Fatal("child worker never entered PrepareRevision")
	}
	if err := c.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("child worker exited cleanly; want killed")
	}
	killedAt := time.Now()

	w, err := st.GetWorkByKey(ctx, occ.DeploymentWorkKey(rev.ID))
	if err != nil {
		t.Fatalf("GetWorkByKey: %v", err)
	}
	expiry := w.LeaseExpiresAt
	if w.State != store.WorkRunning || w.Attempts != 1 || expiry.IsZero() {
		t.Fatalf("work after the kill: state %s, %d attempts, lease until %v; want running, 1, set", w.State, w.Attempts, expiry)
	}
	if !expiry.After(killedAt) {
		t.Fatalf("the dead worker's lease expired at %v, before the kill at %v completed; the machine is too slow for a %v lease", expiry, killedAt, killLease)
	}
	if s, err := st.GetWorkspaceSetup(ctx, f.ns.ID, a.ID); err != nil || s.Completed || len(s.Files) == 0 {
		t.Fatalf("setup after the kill: %+v, %v; want still pending with its files", s, err)
	}

	// Deterministic: at the store, a microsecond before expiry nothing is
	// claimable (the item is the only unfinished one).
	if got, ok, err := st.ClaimWork(ctx, store.Claim{Token: "probe", Now: expiry.Add(-time.Microsecond), Lease: time.Second}); err != nil || ok {
		t.Fatalf("ClaimWork just before the lease expiry: %s, %v, %v; want nothing claimable", got.ID, ok, err)
	}
	// Real time: the in-process worker polls until it gets the item.
	did := false
	for deadline := expiry.Add(10 * time.Second); !did; {
		if did, err = f.srv.Worker.RunOnce(ctx); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if !did && time.Now().After(deadline) {
			t.Fatalf("the in-process worker found nothing to claim by %v, 10s after the lease expiry", deadline)
		}
		if !did {
			time.Sleep(childPoll) // the worker's own poll interval
		}
	}
	var before, taken int
	for _, r := range spy.records() {
		switch {
		case r.ok && r.item == w.ID:
			taken++
			if r.now.Before(expiry) {
				t.Errorf("the in-process worker claimed the item at %v, before the lease expiry %v", r.now, expiry)
			}
		case r.ok:
			// the Namespace's reconcile during the fixture
		case r.now.Before(expiry):
			before++
		}
	}
	if taken != 1 {
		t.Errorf("the in-process worker claimed the item %d times; want 1", taken)
	}
	if before == 0 {
		t.Errorf("the in-process worker made no claim before the lease expiry %v; want at least one refused claim", expiry)
	}

	d, err := f.srv.Service.GetDeployment(f.admin, f.ns.ID, a.ID, rev.ID)
	if err != nil {
		t.Fatalf("GetDeployment: %v", err)
	}
	if d.Status != occ.DeploymentSucceeded {
		t.Errorf("GetDeployment.Status = %q (error %+v); want %q", d.Status, d.Error, occ.DeploymentSucceeded)
	}
	if w, err = st.GetWorkByKey(ctx, occ.DeploymentWorkKey(rev.ID)); err != nil || w.Attempts != 2 {
		t.Errorf("deployment work: %d attempts, %v; want 2 (the killed one and the takeover)", w.Attempts, err)
	}
	if got, err := st.GetAgent(ctx, f.ns.ID, a.ID); err != nil || got.ActiveRevisionID != rev.ID {
		t.Errorf("Agent active revision %q, %v; want %q", got.ActiveRevisionID, err, rev.ID)
	}
	if s, err := st.GetWorkspaceSetup(ctx, f.ns.ID, a.ID); err != nil || !s.Completed || len(s.Files) != 0 {
		t.Errorf("setup after the takeover: completed=%v with %d files, %v; want completed with none", s.Completed, len(s.Files), err)
	}

	// The log: the dead worker entered PrepareRevision and never left; the
	// in-process worker prepared and activated, once, delivering the setup.
	var got []string
	for _, l := range readCalls(t, logPath) {
		who := "child"
		if l.PID == os.Getpid() {
			who = "parent"
		}
		got = append(got, strings.Join([]string{who, l.Method, l.Phase, l.Setup}, " "))
	}
	want := []string{
		"child PrepareRevision enter pending",
		"parent PrepareRevision enter pending", "parent PrepareRevision exit pending",
		"parent ActivateRevision enter pending", "parent ActivateRevision exit pending",
	}
	if !slices.Equal(got, want) {
		t.Errorf("driver calls:\n got %q\nwant %q", got, want)
	}
}

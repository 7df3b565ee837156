package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

// Environment of the crash child: this test binary re-executed as an OCC
// server process that the parent kills with SIGKILL.
const (
	envCrashChild    = "OCC_TEST_CRASH_CHILD"
	envCrashDB       = "OCC_TEST_CRASH_DATABASE_URL"
	envCrashDataDir  = "OCC_TEST_CRASH_DATA_DIR"
	envCrashAddrFile = "OCC_TEST_CRASH_ADDR_FILE"
	envCrashGateway  = "OCC_TEST_CRASH_GATEWAY_URL"
	envCrashToken    = "OCC_TEST_CRASH_TOKEN_FILE"
	envCrashPassword = "OCC_TEST_CRASH_PASSWORD_FILE"
	envCrashBlockAt  = "OCC_TEST_CRASH_BLOCK_AT"     // a driver method to hang in, from revision 2 on
	envCrashReached  = "OCC_TEST_CRASH_REACHED_FILE" // created when it hangs there
)

// crashDriver hangs in one driver method (for revisions from number 2 on)
// after saying so in a file, so the parent can kill the process at exactly
// that worker step.
type crashDriver struct {
	*fakeGatewayDriver
	blockAt, reached string
}

func (d *crashDriver) hang(method string, rev compute.Revision) {
	if method != d.blockAt || rev.Number < 2 {
		return
	}
	_ = os.WriteFile(d.reached, []byte(method), 0o600)
	select {}
}

func (d *crashDriver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	d.hang("PrepareRevision", rev)
	return d.fakeGatewayDriver.PrepareRevision(ctx, rev, rc)
}

func (d *crashDriver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	d.hang("ActivateRevision", rev)
	return d.fakeGatewayDriver.ActivateRevision(ctx, rev, rc)
}

// RetireRevision runs after the activation transaction committed: the
// worker retires the older revision before it finishes the work item.
// Only the redeployment retires anything (revision 1), so it always hangs.
func (d *crashDriver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	d.hang("RetireRevision", compute.Revision{Number: rev.Number + 1})
	return d.fakeGatewayDriver.RetireRevision(ctx, rev)
}

func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) == "1" {
		if err := crashChild(); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild serves the whole OCC server (API and embedded worker) on a
// loopback port, over the database the parent names, with the fake driver
// whose endpoint is the parent's scripted gateway, until it is killed.
func crashChild() error {
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, os.Getenv(envCrashDB), os.Getenv(envCrashDataDir))
	if err != nil {
		return err
	}
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d := &crashDriver{fakeGatewayDriver: &fakeGatewayDriver{Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}),
		target: agentgw.Target{Transport: agentgw.Direct, URL: os.Getenv(envCrashGateway), TokenFile: os.Getenv(envCrashToken)}},
		blockAt: os.Getenv(envCrashBlockAt), reached: os.Getenv(envCrashReached)}
	srv := server.New(server.Options{Store: st, Driver: d, Files: agentgw.New(agentgw.Options{}),
		PublicOrigin: "http://" + ln.Addr().String(), FileTimeout: 2 * time.Minute, Now: time.Now,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// A short lease, so the restarted worker reclaims the killed one's item soon.
		Worker: worker.Options{Poll: 100 * time.Millisecond, Lease: 3 * time.Second}})
	if _, err := srv.Service.Bootstrap(ctx, occ.BootstrapInput{AdminEmail: "admin@example.com",
		PasswordFile: os.Getenv(envCrashPassword), Out: os.Stderr}); err != nil {
		return err
	}
	go func() { _ = srv.Worker.Run(ctx) }()
	addrFile := os.Getenv(envCrashAddrFile)
	if err := os.WriteFile(addrFile+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
		return err
	}
	if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		return err
	}
	return http.Serve(ln, srv.Handler())
}

// crashServer is one run of the child.
type crashServer struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

func startCrashChild(t *testing.T, env []string) *crashServer {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envCrashChild+"=1", envCrashAddrFile+"="+addrFile), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cs := &crashServer{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(cs.done) }()
	t.Cleanup(func() { cs.kill(t) })
	testutil.Eventually(t, 60*time.Second, func() bool {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			cs.base = "http://" + string(b)
		}
		return err == nil
	}, "the crash child's address")
	return cs
}

// kill sends SIGKILL, as a crash or the OOM killer would, and waits.
func (cs *crashServer) kill(t *testing.T) {
	_ = syscall.Kill(-cs.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-cs.done:
	case <-time.After(30 * time.Second):
		t.Error("the crash child did not die")
	}
}

func (cs *crashServer) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(cs.base)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t)
	if _, err := c.SignIn(ctx, "admin@example.com", testPassword); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKill9MidFileWrite kills the OCC server process with SIGKILL while a
// workspace file write is in flight (the set frame reached the gateway,
// which never answers), on both engines. After a restart on the same
// database the write-ahead record is there, without outcome, and the audit
// chain verifies.
func TestKill9MidFileWrite(t *testing.T) {
	for _, engine := range []string{sqlstore.EngineSQLite, sqlstore.EnginePostgres} {
		t.Run(engine, func(t *testing.T) {
			var dbURL, dataDir string
			if engine == sqlstore.EnginePostgres {
				_, dbURL = testdb.PostgresURL(t)
			} else {
				dataDir = t.TempDir()
			}
			gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "original"}})
			target := gw.DirectTarget(t)
			pw := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{envCrashDB + "=" + dbURL, envCrashDataDir + "=" + dataDir, envCrashGateway + "=" + target.URL,
				envCrashToken + "=" + target.TokenFile, envCrashPassword + "=" + pw}
			ctx := testutil.Context(t)

			first := startCrashChild(t, env)
			c := first.client(t)
			ns, err := c.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: "crash"})
			if err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 30*time.Second, func() bool {
				got, err := c.GetNamespace(ctx, ns.ID)
				return err == nil && got.Status == "ready"
			}, "the Namespace ready")
			cfg, err := c.CreateConfiguration(ctx, ns.ID, apitypes.CreateConfigurationRequest{Name: "c", Kind: "agent", Document: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			ag, err := c.CreateAgent(ctx, ns.ID, apitypes.CreateAgentRequest{Name: "crashy", ConfigurationID: cfg.ID})
			if err != nil {
				t.Fatal(err)
			}
			rev, err := c.DeployAgent(ctx, ns.ID, ag.ID)
			if err != nil {
				t.Fatal(err)
			}
			dep, err := c.WaitForDeployment(ctx, ns.ID, ag.ID, rev.ID, 100*time.Millisecond, nil)
			if err != nil || dep.Status != "succeeded" {
				t.Fatalf("deployment: %+v, %v", dep, err)
			}

			gw.SetFault("agents.files.set", gwtest.FaultHang)
			putErr := make(chan error, 1)
			go func() {
				_, _, err := c.PutFile(context.Background(), ns.ID, ag.ID, "SOUL.md", "CRASH-CONTENT-41", "")
				putErr <- err
			}()
			testutil.Eventually(t, 30*time.Second, func() bool { return gw.Frames("agents.files.set") > 0 }, "the set frame at the gateway")
			first.kill(t)
			if err := <-putErr; err == nil {
				t.Fatal("the write succeeded although its server was killed")
			}

			second := startCrashChild(t, env)
			c2 := second.client(t)
			page, err := c2.ListAuditEvents(ctx, apitypes.AuditQuery{Action: occ.ActionWorkspaceFileWrite, WithoutOutcome: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 1 || page.Items[0].Outcome != apitypes.OutcomeAttempted ||
				page.Items[0].Resource.ID != ag.ID || page.Items[0].Details["workspaceFileName"] != "SOUL.md" {
				t.Fatalf("attempts without outcome after the restart = %+v; want the one killed write", page.Items)
			}
			all, err := c2.ListAuditEvents(ctx, apitypes.AuditQuery{Action: occ.ActionWorkspaceFileWrite})
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Items) != 1 {
				t.Errorf("file write records = %+v; want only the attempt", all.Items)
			}
			for _, e := range all.Items {
				if b, _ := json.Marshal(e); strings.Contains(string(b), "CRASH-CONTENT-41") {
					t.Error("an audit record holds the file content")
				}
			}
			second.kill(t)
			st, err := sqlstore.Open(ctx, dbURL, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			res, brk, err := st.VerifyAuditChain(ctx)
			if err != nil || brk != nil || res.Chained == 0 {
				t.Fatalf("audit chain after the crash: %+v %v %v", res, brk, err)
			}
		})
	}
}

// TestKill9MidDeployment kills the OCC server with SIGKILL inside each
// driver step of a redeployment (prepare, activate, and retire of the old
// revision, which comes after the activation transaction committed), on
// both engines. After a restart the deployment finishes exactly once: one
// work item per deployment, succeeded, the new revision active, no extra
// revision, and the audit chain verifies.
func TestKill9MidDeployment(t *testing.T) {
	for _, engine := range []string{sqlstore.EngineSQLite, sqlstore.EnginePostgres} {
		for _, step := range []string{"PrepareRevision", "ActivateRevision", "RetireRevision"} {
			t.Run(engine+"/"+step, func(t *testing.T) {
				t.Parallel() // small processes, no gateways: the six cases wait on leases side by side
				var dbURL, dataDir string
				if engine == sqlstore.EnginePostgres {
					_, dbURL = testdb.PostgresURL(t)
				} else {
					dataDir = t.TempDir()
				}
				gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
				target := gw.DirectTarget(t)
				pw := filepath.Join(t.TempDir(), "pw")
				if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				reached := filepath.Join(t.TempDir(), "reached")
				env := []string{envCrashDB + "=" + dbURL, envCrashDataDir + "=" + dataDir, envCrashGateway + "=" + target.URL,
					envCrashToken + "=" + target.TokenFile, envCrashPassword + "=" + pw}
				ctx := testutil.Context(t)

				first := startCrashChild(t, append(env, envCrashBlockAt+"="+step, envCrashReached+"="+reached))
				c := first.client(t)
				ns, err := c.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: "crash"})
				if err != nil {
					t.Fatal(err)
				}
				testutil.Eventually(t, 30*time.Second, func() bool {
					got, err := c.GetNamespace(ctx, ns.ID)
					return err == nil && got.Status == "ready"
				}, "the Namespace ready")
				cfg, err := c.CreateConfiguration(ctx, ns.ID, apitypes.CreateConfigurationRequest{Name: "c", Kind: "agent", Document: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				ag, err := c.CreateAgent(ctx, ns.ID, apitypes.CreateAgentRequest{Name: "crashy", ConfigurationID: cfg.ID})
				if err != nil {
					t.Fatal(err)
				}
				rev1, err := c.DeployAgent(ctx, ns.ID, ag.ID)
				if err != nil {
					t.Fatal(err)
				}
				if dep, err := c.WaitForDeployment(ctx, ns.ID, ag.ID, rev1.ID, 100*time.Millisecond, nil); err != nil || dep.Status != "succeeded" {
					t.Fatalf("first deployment: %+v, %v", dep, err)
				}
				rev2, err := c.DeployAgent(ctx, ns.ID, ag.ID)
				if err != nil {
					t.Fatal(err)
				}
				testutil.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(reached); return err == nil }, "the worker in %s", step)
				first.kill(t)

				second := startCrashChild(t, env)
				c2 := second.client(t)
				wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				dep, err := c2.WaitForDeployment(wctx, ns.ID, ag.ID, rev2.ID, 200*time.Millisecond, nil)
				if err != nil || dep.Status != "succeeded" {
					t.Fatalf("the killed deployment after the restart: %+v, %v", dep, err)
				}
				revs, err := c2.ListRevisions(ctx, ns.ID, ag.ID)
				if err != nil || len(revs) != 2 {
					t.Fatalf("revisions after the restart: %d, %v; want 2", len(revs), err)
				}
				got, err := c2.GetAgent(ctx, ns.ID, ag.ID)
				if err != nil || got.ActiveRevisionID != rev2.ID {
					t.Fatalf("active revision %q, %v; want %s", got.ActiveRevisionID, err, rev2.ID)
				}
				second.kill(t)

				st, err := sqlstore.Open(ctx, dbURL, dataDir)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				rows, err := st.DB().QueryContext(ctx, `SELECT revision_id, state FROM controller_work WHERE work_kind = 'revision.deploy' ORDER BY revision_id`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				work := map[string][]string{}
				for rows.Next() {
					var rev, state string
					if err := rows.Scan(&rev, &state); err != nil {
						t.Fatal(err)
					}
					work[rev] = append(work[rev], state)
				}
				want := map[string][]string{rev1.ID: {"succeeded"}, rev2.ID: {"succeeded"}}
				if fmt.Sprint(want) != fmt.Sprint(work) {
					t.Errorf("deploy work items = %v; want one succeeded item per deployment %v", work, want)
				}
				if res, brk, err := st.VerifyAuditChain(ctx); err != nil || brk != nil || res.Chained == 0 {
					t.Fatalf("audit chain after the crash: %+v %v %v", res, brk, err)
				}
			})
		}
	}
}

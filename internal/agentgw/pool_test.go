package agentgw_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/workspace"
)

func pooled(o agentgw.PoolOptions) *agentgw.Client {
	o.Enabled = true
	return agentgw.New(agentgw.Options{Pool: o})
}

// replace rewrites a credential or CA file the way a rotation does: a new
// file renamed over the old one.
func replace(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.WriteFile(path+".new", content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestPoolReuse: on the real gateway, pooled operations share one
// connection (the fake counts connections; the real gateway answers every
// operation on it), and concurrent operations on it all succeed, in both
// modes (serialized and multiplexed by request id).
func TestPoolReuse(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	preserve(t, g.Workspace, workspace.UserMD)
	for _, inFlight := range []int{1, 8} {
		c := pooled(agentgw.PoolOptions{MaxInFlight: inFlight})
		defer c.Close()
		target := g.DirectTarget()
		for i := range 3 {
			content := "pooled write " + string(rune('a'+i)) + "\n"
			if _, err := c.Set(testCtx(t), target, workspace.UserMD, content, ""); err != nil {
				t.Fatalf("in-flight %d: Set %d: %v", inFlight, i, err)
			}
			got, err := c.Get(testCtx(t), target, workspace.UserMD)
			if err != nil || got.Content != content {
				t.Fatalf("in-flight %d: Get %d = %+v, %v", inFlight, i, got, err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Get(testCtx(t), target, workspace.UserMD)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("in-flight %d: concurrent Get: %v", inFlight, err)
			}
		}
		if n := agentgw.PoolSize(c); n != 1 {
			t.Errorf("in-flight %d: %d pooled connections, want 1", inFlight, n)
		}
	}

	// The fake counts connections: one for many operations, each with a
	// context that ends right after it (as an API request's does), so the
	// connection outlives the operation that dialed it.
	f := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	c := pooled(agentgw.PoolOptions{})
	defer c.Close()
	ft := f.DirectTarget(t)
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.Get(ctx, ft, workspace.SoulMD)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("5 pooled operations opened %d connections, want 1", n)
	}
}

// TestPoolTokenRotation: the token file is read for every pooled
// operation; when it changes the pooled connection is dropped and the next
// operation connects with the new token. On the real gateway a token it
// does not know is refused on that very operation (the pooled connection,
// authenticated with the old one, is not used), and the right token works
// again on a fresh connection.
func TestPoolTokenRotation(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	token, err := os.ReadFile(g.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	file := gwtest.WriteFile(t, "token", token)
	target := agentgw.Target{Transport: agentgw.Direct, URL: g.URL, TokenFile: file}
	c := pooled(agentgw.PoolOptions{})
	defer c.Close()
	if _, err := c.Get(testCtx(t), target, workspace.AgentsMD); err != nil {
		t.Fatal(err)
	}
	replace(t, file, []byte("rotated-token-the-gateway-does-not-know"))
	_, err = c.Get(testCtx(t), target, workspace.AgentsMD)
	if diff := cmp.Diff(unavailable("connect_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get after rotation to an unknown token (-want +got):\n%s", diff)
	}
	noSecret(t, err, "rotated-token-the-gateway-does-not-know", string(token))
	replace(t, file, token)
	if _, err := c.Get(testCtx(t), target, workspace.AgentsMD); err != nil {
		t.Fatalf("Get after rotating back: %v", err)
	}

	// On the fake: a changed file costs exactly one new connection.
	f := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	ft := f.DirectTarget(t)
	fc := pooled(agentgw.PoolOptions{})
	defer fc.Close()
	for range 2 {
		if _, err := fc.Get(testCtx(t), ft, workspace.SoulMD); err != nil {
			t.Fatal(err)
		}
	}
	replace(t, ft.TokenFile, []byte(f.Token)) // same bytes: same connection
	if _, err := fc.Get(testCtx(t), ft, workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("unchanged token: %d connections, want 1", n)
	}
	replace(t, ft.TokenFile, []byte("wrong-token"))
	if _, err := fc.Get(testCtx(t), ft, workspace.SoulMD); outcomeOf(err) != unavailable("connect_refused") {
		t.Errorf("Get with a wrong token = %v, want connect_refused", err)
	}
	if n := f.Connections(); n != 2 {
		t.Errorf("changed token: %d connections, want 2", n)
	}
}

// TestPoolRoutedRotation: through the proxy (TLS from gwtest's CA), a
// changed CA bundle or service key drops the pooled connection: a CA that
// no longer trusts the proxy fails the next operation with tls, and a
// rotated key is the one the proxy sees next.
func TestPoolRoutedRotation(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	target := p.Target(t)
	c := pooled(agentgw.PoolOptions{})
	defer c.Close()
	get := func() error {
		_, err := c.Get(testCtx(t), target, workspace.AgentsMD)
		return err
	}
	for range 3 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Forwarded(); n != 1 {
		t.Errorf("3 pooled operations: proxy forwarded %d upgrades, want 1", n)
	}
	// The same CA written again (another file, same bytes): kept.
	replace(t, target.CAFile, p.CAPEM)
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if n := p.Forwarded(); n != 1 {
		t.Errorf("unchanged CA: %d upgrades, want 1", n)
	}
	// Another CA only: the proxy's certificate is no longer trusted.
	other, err := gwtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	replace(t, target.CAFile, other.PEM)
	if diff := cmp.Diff(unavailable("tls"), outcomeOf(get())); diff != "" {
		t.Errorf("Get after the CA changed (-want +got):\n%s", diff)
	}
	replace(t, target.CAFile, p.CAPEM)
	if err := get(); err != nil {
		t.Fatalf("Get with the CA back: %v", err)
	}
	// Key rotation: the proxy takes only the new key from now on.
	p.SetKey("rotated-service-key-0123456789")
	replace(t, target.KeyFile, []byte("rotated-service-key-0123456789"))
	before := p.Forwarded()
	if err := get(); err != nil {
		t.Fatalf("Get after key rotation: %v", err)
	}
	if p.Forwarded() != before+1 {
		t.Errorf("a rotated key did not open a new connection")
	}
}

// warmPool returns a fake gateway and a pooled client (closed when the
// test ends) that already holds an open connection to it, made by one Get.
func warmPool(t *testing.T) (*gwtest.FakeGateway, *agentgw.Client, agentgw.Target) {
	t.Helper()
	f := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	c := pooled(agentgw.PoolOptions{})
	t.Cleanup(func() { c.Close() })
	target := f.DirectTarget(t)
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	return f, c, target
}

// TestPoolUnknownOutcome: a pooled connection that drops after the set
// frame was sent is OutcomeUnknown and the set is not sent again; the next
// operation dials a fresh connection. A pooled connection that is already
// closed before anything is sent is replaced by one fresh dial.
func TestPoolUnknownOutcome(t *testing.T) {
	f, c, target := warmPool(t)
	f.SetFault(methodSet, gwtest.FaultClose)
	_, err := c.Set(testCtx(t), target, workspace.SoulMD, "applied?\n", "")
	if diff := cmp.Diff(unknown("connection_lost_after_send"), outcomeOf(err)); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	if n := f.Frames(methodSet); n != 1 {
		t.Errorf("gateway received %d set frames, want exactly 1", n)
	}
	f.SetFault(methodSet, gwtest.FaultNone)
	if _, err := c.Set(testCtx(t), target, workspace.SoulMD, "next\n", ""); err != nil {
		t.Fatalf("Set after the drop: %v", err)
	}
	if n := f.Connections(); n != 2 {
		t.Errorf("%d connections, want 2 (the dropped one and a fresh one)", n)
	}

	// Closed under the pool before use (the gateway restarted, say): the
	// operation redials once and succeeds; the set is sent once.
	agentgw.BreakPooled(c)
	frames := f.Frames(methodSet)
	if _, err := c.Set(testCtx(t), target, workspace.SoulMD, "after restart\n", ""); err != nil {
		t.Fatalf("Set on a pooled connection closed before use: %v", err)
	}
	if n := f.Frames(methodSet) - frames; n != 1 {
		t.Errorf("%d set frames, want 1", n)
	}
}

// TestPoolWriteTurnPastTheDeadline: a set whose deadline passes while it
// waits for its turn to write on a shared connection (another operation is
// writing) was never sent: it fails as unavailable, not as an unknown
// outcome, the gateway sees no frame of it, and the connection carries
// the next operation.
func TestPoolWriteTurnPastTheDeadline(t *testing.T) {
	f, c, target := warmPool(t)
	frames := f.Frames(methodSet)
	release := agentgw.HoldPooledWrites(c)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Set(ctx, target, workspace.SoulMD, "never sent\n", "")
	release()
	if diff := cmp.Diff(unavailable("deadline"), outcomeOf(err)); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	if n := f.Frames(methodSet) - frames; n != 0 {
		t.Errorf("the gateway received %d set frames, want none", n)
	}
	if _, err := c.Set(testCtx(t), target, workspace.SoulMD, "next\n", ""); err != nil {
		t.Fatalf("Set after: %v", err)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestPoolAnswerOfAnotherShape: on a pooled connection, an answer that is
// JSON but not a file answer fails that operation as it does on a
// connection of its own (a get Unavailable, a set OutcomeUnknown), and the
// connection, still in step, carries the next operation.
func TestPoolAnswerOfAnotherShape(t *testing.T) {
	f, c, target := warmPool(t)
	f.SetFault(methodGet, gwtest.FaultPayloadType)
	f.SetFault(methodSet, gwtest.FaultPayloadType)
	_, err := c.Get(testCtx(t), target, workspace.SoulMD)
	if diff := cmp.Diff(unavailable("invalid_answer"), outcomeOf(err)); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	_, err = c.Set(testCtx(t), target, workspace.SoulMD, "applied?\n", "")
	if diff := cmp.Diff(unknown("invalid_answer"), outcomeOf(err)); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	f.SetFault(methodGet, gwtest.FaultNone)
	got, err := c.Get(testCtx(t), target, workspace.SoulMD)
	if err != nil || got.Content != "applied?\n" {
		t.Fatalf("Get after = %q, %v; want the applied content", got.Content, err)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestPoolBounds: at most MaxConnections pooled connections (the idle one
// used longest ago makes room), and an idle connection is closed after
// IdleTimeout. The timeout is long enough that the three operations below
// finish well within it on a loaded machine (at 200 ms, one pooled
// connection sometimes idled out before the cap was checked).
func TestPoolBounds(t *testing.T) {
	c := pooled(agentgw.PoolOptions{MaxConnections: 2, IdleTimeout: 3 * time.Second})
	defer c.Close()
	var gws []*gwtest.FakeGateway
	for range 3 {
		gws = append(gws, gwtest.NewFakeGateway(t, gwtest.FakeOptions{}))
	}
	for i, g := range gws[:2] {
		if _, err := c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD); err != nil {
			t.Fatal(i, err)
		}
	}
	if n := agentgw.PoolSize(c); n != 2 {
		t.Errorf("at the cap: %d pooled, want 2", n)
	}
	if _, err := c.Get(testCtx(t), gws[2].DirectTarget(t), workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	if n := agentgw.PoolSize(c); n != 2 {
		t.Errorf("one past the cap: %d pooled, want 2", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for agentgw.PoolSize(c) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := agentgw.PoolSize(c); n != 0 {
		t.Errorf("after the idle timeout: %d pooled, want 0", n)
	}
}

// TestPoolCanceledOperation: an operation whose context ends while it
// waits for its answer marks the pooled connection suspect: the next
// operation dials a fresh one.
func TestPoolCanceledOperation(t *testing.T) {
	f, c, target := warmPool(t)
	f.SetFault(methodGet, gwtest.FaultHang)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, target, workspace.SoulMD); outcomeOf(err) != unavailable("deadline") {
		t.Errorf("hung Get = %v, want deadline", err)
	}
	f.SetFault(methodGet, gwtest.FaultNone)
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Errorf("Get after a timed-out one: %v", err)
	}
	if n := f.Connections(); n != 2 {
		t.Errorf("%d connections, want 2 (the one the timed-out Get left is not reused)", n)
	}
}

// TestPoolEndedContextSendsNothing: a set whose context has ended when the
// shared connection's write turn is free is not written (select would pick
// the free turn half of the time, and a write on an ended context closes
// the connection under every other operation on it); the connection
// carries the next operation.
func TestPoolEndedContextSendsNothing(t *testing.T) {
	f, c, target := warmPool(t)
	frames := f.Frames(methodSet)
	sent, dead := agentgw.SetWithEndedContext(c, 64)
	if sent != 0 || dead {
		t.Errorf("64 sets with an ended context: %d sent, connection closed %v; want none sent, open", sent, dead)
	}
	if n := f.Frames(methodSet) - frames; n != 0 {
		t.Errorf("the gateway received %d set frames, want none", n)
	}
	if _, err := c.Set(testCtx(t), target, workspace.SoulMD, "next\n", ""); err != nil {
		t.Fatalf("Set after: %v", err)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

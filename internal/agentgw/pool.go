package agentgw

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw/occ/internal/compute"
)

// Pool defaults.
const (
	DefaultPoolIdleTimeout    = 60 * time.Second
	DefaultPoolMaxConnections = 64
	// DefaultPoolMaxInFlight: operations multiplexed on one connection.
	// The files benchmark measured multiplexing against taking turns at
	// concurrency 16 (docs/performance.md): 1.2x to 2.4x the pooled
	// throughput, in two runs on the local and SSH drivers.
	DefaultPoolMaxInFlight = 16
)

// PoolOptions turns on the optional pooled gateway connection: one open,
// authenticated connection per gateway (per Agent), reused by later
// operations. Off unless Enabled.
//
// What does not change: every operation still reads and validates the
// token or key file (and, routed, the CA bundle) first, exactly as without
// the pool; the pooled connection is used only if what was read is what
// it was opened with (compared by an HMAC under a per-process random key,
// so no credential is kept), else it is dropped and a fresh one is dialed
// with what was read. A rotated credential therefore applies to the next
// operation. The hello's role and scopes are checked for every operation.
// Failure semantics are the same as without the pool: a set whose frame
// was handed to the connection and that got no reliable answer is
// OutcomeUnknown and never retried; a pooled connection found broken
// before anything was sent on it is replaced by one fresh dial, once.
type PoolOptions struct {
	Enabled bool
	// IdleTimeout closes a pooled connection unused this long (default
	// DefaultPoolIdleTimeout).
	IdleTimeout time.Duration
	// MaxConnections caps the pooled connections (default
	// DefaultPoolMaxConnections). When the cap is reached the idle
	// connection unused longest is closed; when none is idle, the
	// operation uses a connection of its own, closed after it.
	MaxConnections int
	// MaxInFlight is how many operations share one connection at once,
	// matched to their answers by request id; more wait for a turn, within
	// their deadline. 1 serializes them; zero means DefaultPoolMaxInFlight.
	MaxInFlight int
}

// poolKey names one gateway: the target's fields. A tunnel is part of the
// key only if its dynamic type is comparable (the SSH driver's is a value
// naming host, port and Agent); a target whose tunnel is not is never
// pooled.
type poolKey struct {
	transport                       Transport
	url, tokenFile, keyFile, caFile string
	tunnel                          compute.Tunnel
}

func keyOf(t Target) (poolKey, bool) {
	if t.Tunnel != nil && !reflect.TypeOf(t.Tunnel).Comparable() {
		return poolKey{}, false
	}
	return poolKey{t.Transport, t.URL, t.TokenFile, t.KeyFile, t.CAFile, t.Tunnel}, true
}

type pool struct {
	opts   PoolOptions
	macKey []byte

	mu     sync.Mutex
	conns  map[poolKey]*pconn
	closed bool
}

func newPool(o PoolOptions) *pool {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultPoolIdleTimeout
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultPoolMaxConnections
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultPoolMaxInFlight
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails on supported platforms
	return &pool{opts: o, macKey: k, conns: map[poolKey]*pconn{}}
}

// fingerprint is what a connection was authenticated with: an HMAC of the
// credential and the CA bundle read for this operation.
func (p *pool) fingerprint(pr *prepared) [32]byte {
	m := hmac.New(sha256.New, p.macKey)
	for _, part := range [][]byte{[]byte(pr.transport), []byte(pr.token), []byte(pr.header.Get(HeaderAPIKey)), pr.caPEM} {
		m.Write([]byte(strconv.Itoa(len(part))))
		m.Write([]byte{':'})
		m.Write(part)
	}
	var fp [32]byte
	copy(fp[:], m.Sum(nil))
	return fp
}

// pconn is one pooled connection: the session, the hello it was granted,
// and the read loop that hands answers to the operation waiting for them.
type pconn struct {
	p     *pool
	key   poolKey
	fp    [32]byte
	s     *session
	hello *helloOK
	turns chan struct{} // MaxInFlight slots
	// writing is held by the one operation writing a frame. Taking it
	// before Write, with the operation's context, tells a frame that was
	// never begun (the deadline passed while others wrote: nothing sent,
	// a plain failure) from one whose write began (the gateway may have
	// it: an unknown outcome for a set).
	writing chan struct{}
	done    chan struct{} // closed when the read loop ends: the connection is dead
	pooled  bool          // in p.conns (false: one operation's own connection)
	err     error         // why the read loop ended; read after done is closed

	mu      sync.Mutex
	next    uint64
	pending map[string]chan frame[filePayload]

	// Guarded by p.mu.
	suspect  bool // an operation got no answer on it: not reused
	users    int
	retired  bool // out of the map: closed when its last user leaves
	lastUsed time.Time
	idle     *time.Timer
}

func (c *pconn) dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// readLoop reads every frame until the connection ends. Answers go to the
// operation that registered their id; events (ticks, health) and answers
// nobody waits for any more are dropped.
func (c *pconn) readLoop() {
	defer close(c.done)
	for {
		f, err := readFrame[filePayload](context.Background(), c.s)
		if err != nil {
			c.err = err
			return
		}
		if f.Type != "res" {
			continue
		}
		c.mu.Lock()
		ch := c.pending[f.ID]
		delete(c.pending, f.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

// roundTrip sends one request frame and waits for its answer. sent reports
// whether Write was called (from then on the gateway may have the frame).
func (c *pconn) roundTrip(ctx context.Context, method string, params any) (f frame[filePayload], sent bool, err error) {
	c.mu.Lock()
	c.next++
	id := "r" + strconv.FormatUint(c.next, 10)
	ch := make(chan frame[filePayload], 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	data, err := encodeFrame(reqFrame{Type: "req", ID: id, Method: method, Params: params})
	if err != nil {
		return frame[filePayload]{}, false, err
	}
	if c.dead() {
		return frame[filePayload]{}, false, errPooledDead
	}
	// The write is bounded by the operation's deadline but not ended by
	// its cancellation (a client that went away): a write cut short closes
	// the connection, which would turn the other operations in flight on
	// it into lost answers (OutcomeUnknown for their sets). A write on
	// loopback or a local channel is quick; only a peer that stopped
	// reading makes it wait, and the deadline ends that.
	wctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(wctx, dl)
		defer cancel()
	}
	select {
	case c.writing <- struct{}{}:
	case <-ctx.Done():
		return frame[filePayload]{}, false, ctx.Err()
	case <-c.done:
		return frame[filePayload]{}, false, errPooledDead
	}
	// select picks either ready case at random: a deadline that passed
	// while the write turn was free must not reach Write, which would
	// close the shared connection at once (the library ends a write on an
	// expired context by closing) and lose the answers of every other
	// operation on it. Nothing was sent.
	if err := ctx.Err(); err != nil {
		<-c.writing
		return frame[filePayload]{}, false, err
	}
	err = c.s.conn.Write(wctx, websocket.MessageText, data)
	<-c.writing
	if err != nil {
		return frame[filePayload]{}, true, err
	}
	select {
	case f := <-ch:
		return answered(f)
	case <-c.done:
		// The answer may have been delivered just before the loop ended.
		select {
		case f := <-ch:
			return answered(f)
		default:
		}
		return frame[filePayload]{}, true, fmt.Errorf("pooled connection lost: %w", c.err)
	case <-ctx.Done():
		// The gateway may still be busy with it, or stuck: the
		// connection is not offered to another operation.
		c.p.mu.Lock()
		c.suspect = true
		c.p.mu.Unlock()
		return frame[filePayload]{}, true, ctx.Err()
	}
}

// answered is roundTrip's result for the answer f: a successful answer
// whose payload is not a file answer is errBadPayload, as on a connection
// of its own.
func answered(f frame[filePayload]) (frame[filePayload], bool, error) {
	if f.OK && f.badPayload {
		return frame[filePayload]{}, true, errBadPayload
	}
	return f, true, nil
}

var errPooledDead = errors.New("pooled connection was closed before the request was sent")

// acquire returns a connection for key authenticated with fp, holding one
// of its turns: the pooled one if it matches and is alive, else a fresh
// one from dial (pooled when the cap allows). A pooled connection whose
// fingerprint differs, or that died, is retired first. Nothing is sent
// here but the handshake of a fresh connection, so every failure is
// Unavailable.
func (p *pool) acquire(ctx context.Context, key poolKey, fp [32]byte, dial func() (*pconn, error)) (*pconn, error) {
	p.mu.Lock()
	if c := p.conns[key]; c != nil {
		if c.fp == fp && !c.suspect && !c.dead() {
			c.users++
			if c.idle != nil {
				c.idle.Stop()
			}
			p.mu.Unlock()
			if err := c.takeTurn(ctx); err != nil {
				p.release(c) // no turn was taken
				return nil, err
			}
			return c, nil
		}
		p.retireLocked(c) // rotated credential or CA, or a dead connection
	}
	p.mu.Unlock()

	c, err := dial()
	if err != nil {
		return nil, err
	}
	// The turn is taken while c is still this operation's alone: once it
	// is published below, other operations can take every turn, and a
	// send on turns here would then wait for one of them to finish,
	// past this operation's deadline.
	c.turns <- struct{}{}
	p.mu.Lock()
	c.users = 1
	if !p.closed && p.conns[key] == nil && p.roomLocked() {
		c.pooled = true
		p.conns[key] = c
	}
	p.mu.Unlock()
	return c, nil
}

// takeTurn waits for one of c's turns within ctx. A context that has
// ended gets no turn even when one is free (select would pick either
// ready case at random).
func (c *pconn) takeTurn(ctx context.Context) error {
	select {
	case c.turns <- struct{}{}:
		if err := ctx.Err(); err != nil {
			c.releaseTurn()
			return unavailable(ctxReason(err), err)
		}
		return nil
	case <-ctx.Done():
		return unavailable(ctxReason(ctx.Err()), ctx.Err())
	}
}

// roomLocked makes room for one more pooled connection: true when below
// the cap, or after closing the idle connection unused longest.
func (p *pool) roomLocked() bool {
	if len(p.conns) < p.opts.MaxConnections {
		return true
	}
	var oldest *pconn
	for _, c := range p.conns {
		if c.users == 0 && (oldest == nil || c.lastUsed.Before(oldest.lastUsed)) {
			oldest = c
		}
	}
	if oldest == nil {
		return false
	}
	p.retireLocked(oldest)
	return true
}

// release gives back the use of c (its turn is given back first, with
// releaseTurn). The last user of a retired
// or unpooled connection closes it; an idle pooled one is closed after
// IdleTimeout unless used again.
func (p *pool) release(c *pconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.users--
	c.lastUsed = time.Now()
	if c.users > 0 {
		return
	}
	if c.retired || !c.pooled || c.suspect || c.dead() {
		p.retireLocked(c)
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(p.opts.IdleTimeout, func() { p.expire(c) })
	} else {
		c.idle.Reset(p.opts.IdleTimeout)
	}
}

// releaseTurn gives back the turn taken by acquire.
func (c *pconn) releaseTurn() { <-c.turns }

func (p *pool) expire(c *pconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.users == 0 && time.Since(c.lastUsed) >= p.opts.IdleTimeout {
		p.retireLocked(c)
	}
}

// retireLocked takes c out of the pool; it is closed now if unused, else
// by its last user.
func (p *pool) retireLocked(c *pconn) {
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	c.retired = true
	if c.idle != nil {
		c.idle.Stop()
	}
	if c.users == 0 {
		go c.s.close() // the close handshake takes up to closeTimeout
	}
}

// close closes every pooled connection; later operations do not pool.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		p.retireLocked(c)
	}
}

// size is how many connections are pooled (tests).
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

package agentgw

import (
	"context"
	"net"
)

// PoolSize is how many connections c's pool holds.
func PoolSize(c *Client) int { return c.pool.size() }

// BreakPooled closes every pooled connection's socket under the pool, as
// a gateway restart would, without telling the pool.
func BreakPooled(c *Client) {
	for _, pc := range pooledConns(c) {
		pc.s.raw.each(func(nc net.Conn) { _ = nc.Close() })
		<-pc.done
	}
}

// HoldPooledWrites takes the write turn of every pooled connection, as an
// operation writing a long frame to a peer that reads slowly would, and
// returns how to give it back.
func HoldPooledWrites(c *Client) (release func()) {
	conns := pooledConns(c)
	for _, pc := range conns {
		pc.writing <- struct{}{}
	}
	return func() {
		for _, pc := range conns {
			<-pc.writing
		}
	}
}

// pooledConns is the pool's connections at this moment.
func pooledConns(c *Client) []*pconn {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	var conns []*pconn
	for _, pc := range c.pool.conns {
		conns = append(conns, pc)
	}
	return conns
}

// SetWithEndedContext makes n set requests on the client's pooled
// connection with a context that has already ended, while its write turn
// is free, and reports how many were sent and whether the connection died.
func SetWithEndedContext(c *Client, n int) (sent int, dead bool) {
	pc := pooledConns(c)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range n {
		if _, s, _ := pc.roundTrip(ctx, methodSet, setParams{AgentID: NativeAgentID, Name: "SOUL.md", Content: "never sent\n"}); s {
			sent++
		}
	}
	return sent, pc.dead()
}

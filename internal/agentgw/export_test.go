package agentgw

import "net"

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

package ssh

import "context"

// ReadTokenOnHost reads agentHash's token through the first host's token
// reader (tests of the reader without a gateway).
func ReadTokenOnHost(ctx context.Context, d *Driver, agentHash string) ([]byte, error) {
	return d.hosts[0].readToken(ctx, agentHash)
}

// TokenReaderSession identifies the first host's open reader session (nil
// when none), so a test can tell a reused session from a new one.
func TokenReaderSession(d *Driver) any {
	h := d.hosts[0]
	h.tokens.mu <- struct{}{}
	defer func() { <-h.tokens.mu }()
	if h.tokens.reader == nil {
		return nil
	}
	return h.tokens.reader.sess
}

// BreakTokenReader closes the first host's reader session under it, as a
// session that died would be.
func BreakTokenReader(d *Driver) {
	h := d.hosts[0]
	h.tokens.mu <- struct{}{}
	defer func() { <-h.tokens.mu }()
	if h.tokens.reader != nil {
		h.tokens.reader.close()
		<-h.tokens.reader.done
	}
}

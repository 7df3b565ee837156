package server

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

// TestClientAddr: the sign-in throttle's client address is the peer unless
// the peer is a trusted proxy; then X-Forwarded-For from the right,
// skipping trusted proxies.
func TestClientAddr(t *testing.T) {
	a := &admission{trustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	tests := []struct {
		name string
		peer string
		xff  []string
		want string
	}{
		{"untrusted peer, no header", "192.0.2.1:1000", nil, "192.0.2.1"},
		{"untrusted peer's header is not read", "192.0.2.1:1000", []string{"198.51.100.9"}, "192.0.2.1"},
		{"trusted peer without header", "10.1.1.1:1000", nil, "10.1.1.1"},
		{"trusted peer, one hop", "10.1.1.1:1000", []string{"198.51.100.9"}, "198.51.100.9"},
		{"forged left entries are skipped", "10.1.1.1:1000", []string{"6.6.6.6, 198.51.100.9"}, "198.51.100.9"},
		{"trusted hops are skipped", "10.1.1.1:1000", []string{"198.51.100.9, 10.2.2.2", "10.3.3.3"}, "198.51.100.9"},
		{"malformed entry stops at the last trusted hop", "10.1.1.1:1000", []string{"198.51.100.9, junk, 10.2.2.2"}, "10.2.2.2"},
		{"all trusted", "10.1.1.1:1000", []string{"10.2.2.2"}, "10.2.2.2"},
		{"IPv6 and mapped IPv4", "[fd00::1]:1000", []string{"::ffff:198.51.100.9"}, "198.51.100.9"},
		{"no IP peer", "pipe", nil, "invalid IP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := a.clientAddr(r).String(); got != tc.want {
				t.Errorf("clientAddr = %s; want %s", got, tc.want)
			}
		})
	}
}

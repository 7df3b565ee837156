package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDerivedPublicOriginBlamesListen: when the public origin was derived
// from a listen address that gives no usable origin, the error is about
// --listen and says to set --public-origin; an origin the operator set is
// reported as before.
func TestDerivedPublicOriginBlamesListen(t *testing.T) {
	const advice = "; set --public-origin to the scheme://host[:port] browsers use to reach OCC"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // "" means valid; otherwise the whole error text
	}{
		{"port 0", []string{"--listen", "127.0.0.1:0"}, nil,
			`listen address "127.0.0.1:0": the public origin derived from it is not usable (public origin "http://127.0.0.1:0": port "0" is not a number from 1 to 65535)` + advice},
		{"upper-case host", []string{"--listen", "LOCALHOST:8080"}, nil,
			`listen address "LOCALHOST:8080": the public origin derived from it is not usable (public origin "http://LOCALHOST:8080" must be written as "http://localhost:8080")` + advice},
		{"default port", nil, map[string]string{"OCC_LISTEN": "127.0.0.1:80"},
			`listen address "127.0.0.1:80": the public origin derived from it is not usable (public origin "http://127.0.0.1:80" must omit the default port :80 (browsers send http://127.0.0.1))` + advice},
		{"port 0 with a public origin", []string{"--listen", "127.0.0.1:0", "--public-origin", "http://localhost:8080"}, nil, ""},
		{"a set origin is blamed itself", []string{"--listen", "LOCALHOST:8080", "--public-origin", "http://LOCALHOST:8080"}, nil,
			`public origin "http://LOCALHOST:8080" must be written as "http://localhost:8080"`},
		{"an invalid listen address is reported alone", []string{"--listen", "8080"}, nil,
			`listen address "8080" is not host:port (like 127.0.0.1:8080)`},
	}
	for _, tt := range tests {
		_, err := load(parseFlags(t, tt.args...), mapEnv(tt.env))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("load(%s: %q, %v) error (-want +got):\n%s", tt.name, tt.args, tt.env, diff)
		}
	}
}

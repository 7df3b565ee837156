package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFileBoolStrict: the file's on/off options take true or false, as
// their flags and environment variables do; YAML 1.1's yes/no/on/off,
// which yaml.v3 would otherwise read as booleans, are errors naming the
// key and line.
func TestFileBoolStrict(t *testing.T) {
	type got struct{ EmbeddedWorker, GatewayPool bool }
	tests := []struct {
		name    string
		content string
		want    got
		wantErr string // "" means no error; else the error after the file name
	}{
		{"true and false", "worker:\n  embedded: false\ngateway:\n  pool:\n    enabled: true\n", got{false, true}, ""},
		{"YAML 1.2 capitals", "worker:\n  embedded: FALSE\ngateway:\n  pool:\n    enabled: True\n", got{false, true}, ""},
		{"unset keeps the defaults", "worker:\n  concurrency: 2\n", got{true, false}, ""},
		{"null keeps the default", "worker:\n  embedded: ~\n", got{true, false}, ""},
		{"no", "worker:\n  embedded: no\n", got{}, "line 2: worker.embedded must be true or false, not !!str `no`"},
		{"off", "worker:\n  embedded: off\n", got{}, "line 2: worker.embedded must be true or false, not !!str `off`"},
		{"yes", "gateway:\n  pool:\n    enabled: yes\n", got{}, "line 3: gateway.pool.enabled must be true or false, not !!str `yes`"},
		{"on", "gateway:\n  pool:\n    enabled: on\n", got{}, "line 3: gateway.pool.enabled must be true or false, not !!str `on`"},
		{"y", "gateway:\n  pool:\n    enabled: Y\n", got{}, "line 3: gateway.pool.enabled must be true or false, not !!str `Y`"},
		{"quoted", "worker:\n  embedded: \"false\"\n", got{}, "line 2: worker.embedded must be true or false, not !!str `false`"},
		{"number", "worker:\n  embedded: 0\n", got{}, "line 2: worker.embedded must be true or false, not !!int `0`"},
		{"both, with another type error", "worker:\n  embedded: no\n  concurrency: many\ngateway:\n  pool:\n    enabled: on\n", got{},
			"line 2: worker.embedded must be true or false, not !!str `no`; line 3: cannot unmarshal !!str `many` into int; " +
				"line 6: gateway.pool.enabled must be true or false, not !!str `on`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			c, err := load(nil, mapEnv(map[string]string{EnvConfig: path}))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("load(file %q) = EmbeddedWorker %v, GatewayPool %v; want error %q", tt.content, c.EmbeddedWorker, c.GatewayPool, tt.wantErr)
				}
				if diff := cmp.Diff("config file "+path+": "+tt.wantErr, err.Error()); diff != "" {
					t.Errorf("load(file %q) error (-want +got):\n%s", tt.content, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("load(file %q): %v", tt.content, err)
			}
			if diff := cmp.Diff(tt.want, got{c.EmbeddedWorker, c.GatewayPool}); diff != "" {
				t.Errorf("load(file %q) (-want +got):\n%s", tt.content, diff)
			}
		})
	}
}

// TestFileBoolKeys: each on/off option of the file names itself in errors
// by its key in the options table.
func TestFileBoolKeys(t *testing.T) {
	for _, o := range options {
		if o.typ != "bool" {
			continue
		}
		keys := strings.Split(o.yaml, ".")
		var b strings.Builder
		for i, k := range keys {
			b.WriteString(strings.Repeat("  ", i) + k + ":")
			if i < len(keys)-1 {
				b.WriteString("\n")
			}
		}
		b.WriteString(" no\n")
		_, err := load(nil, mapEnv(map[string]string{EnvConfig: writeConfig(t, b.String())}))
		if want := " " + o.yaml + " must be true or false"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("load(%s: no) error = %v, want it to contain %q", o.yaml, err, want)
		}
	}
}

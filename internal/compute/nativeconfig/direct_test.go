package nativeconfig

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
)

// secret stands for any value of a document: no message may repeat it.
const secret = "doc-secret-value-7f3a"

func testDirect(logFile string) Direct {
	return Direct{
		Driver:       "test",
		Workspace:    "/agents/a1/workspace",
		WorkspaceWhy: "the test driver places it",
		LogFile:      logFile,
		MaxLogBytes:  60_000,
	}
}

// TestDirectParse walks every rule of Direct.Check and Parse, each with
// a document it accepts (the key absent, or OCC's own value) and one it
// refuses, and the key the refusal names.
func TestDirectParse(t *testing.T) {
	tests := []struct {
		rule    string
		doc     string
		logFile string // the Direct's LogFile; "" leaves logging alone
		want    string // "" accepts; else a substring of the refusal
	}{
		{"empty document", ``, "", ""},
		{"empty object", `{}`, "", ""},
		{"not JSON", `{"gateway":`, "", "not a JSON object"},
		{"an array", `[]`, "", "not a JSON object"},
		{"null", `null`, "", "not a JSON object"},
		{"trailing data", `{} {}`, "", "trailing data"},

		{"gateway an object", `{"gateway":{}}`, "", ""},
		{"gateway not an object", `{"gateway":["` + secret + `"]}`, "", "test: gateway must be an object"},
		{"gateway.mode local", `{"gateway":{"mode":"local"}}`, "", ""},
		{"gateway.mode remote", `{"gateway":{"mode":"remote"}}`, "", `test: gateway.mode must be absent or "local"`},
		{"gateway.mode not a string", `{"gateway":{"mode":1}}`, "", `gateway.mode must be absent or "local"`},
		{"gateway.bind loopback", `{"gateway":{"bind":"loopback"}}`, "", ""},
		{"gateway.bind lan", `{"gateway":{"bind":"lan"}}`, "", `test: gateway.bind must be absent or "loopback"`},
		{"gateway.bind custom", `{"gateway":{"bind":"custom"}}`, "", `gateway.bind must be absent or "loopback"`},
		{"customBindHost", `{"gateway":{"customBindHost":"` + secret + `"}}`, "", "test: gateway.customBindHost is not allowed"},
		{"customBindHost empty", `{"gateway":{"customBindHost":""}}`, "", "gateway.customBindHost is not allowed"},

		{"tailscale off", `{"gateway":{"tailscale":{"mode":"off"}}}`, "", ""},
		{"tailscale without mode", `{"gateway":{"tailscale":{"resetOnExit":true}}}`, "", ""},
		{"tailscale serve", `{"gateway":{"tailscale":{"mode":"serve"}}}`, "", `test: gateway.tailscale.mode must be absent or "off"`},
		{"tailscale funnel", `{"gateway":{"tailscale":{"mode":"funnel"}}}`, "", `gateway.tailscale.mode must be absent or "off"`},
		{"tailscale not an object", `{"gateway":{"tailscale":"` + secret + `"}}`, "", "test: gateway.tailscale must be an object"},

		{"auth mode token", `{"gateway":{"auth":{"mode":"token"}}}`, "", ""},
		{"auth mode password", `{"gateway":{"auth":{"mode":"password"}}}`, "", `test: gateway.auth.mode must be absent or "token"`},
		{"auth mode none", `{"gateway":{"auth":{"mode":"none"}}}`, "", `gateway.auth.mode must be absent or "token"`},
		{"auth mode trusted-proxy", `{"gateway":{"auth":{"mode":"trusted-proxy"}}}`, "", `gateway.auth.mode must be absent or "token"`},
		{"auth not an object", `{"gateway":{"auth":"` + secret + `"}}`, "", "test: gateway.auth must be an object"},
		{"auth token", `{"gateway":{"auth":{"token":"` + secret + `"}}}`, "", "test: gateway.auth.token is not allowed"},
		{"auth password", `{"gateway":{"auth":{"password":"` + secret + `"}}}`, "", "test: gateway.auth.password is not allowed"},
		{"auth trustedProxy", `{"gateway":{"auth":{"trustedProxy":{"userHeader":"` + secret + `"}}}}`, "", "test: gateway.auth.trustedProxy is not allowed"},
		{"other gateway keys pass", `{"gateway":{"controlUi":{"enabled":false},"auth":{"rateLimit":{"maxAttempts":5}}}}`, "", ""},

		{"agents not an object", `{"agents":[]}`, "", "test: agents must be an object"},
		{"defaults not an object", `{"agents":{"defaults":1}}`, "", "test: agents.defaults must be an object"},
		{"defaults workspace own", `{"agents":{"defaults":{"workspace":"/agents/a1/workspace"}}}`, "", ""},
		{"defaults workspace own with a slash", `{"agents":{"defaults":{"workspace":"/agents/a1/workspace/"}}}`, "", ""},
		{"defaults workspace own, unclean", `{"agents":{"defaults":{"workspace":"/agents/a1/../a1/workspace"}}}`, "", ""},
		{"defaults workspace elsewhere", `{"agents":{"defaults":{"workspace":"/tmp/` + secret + `"}}}`, "", "test: agents.defaults.workspace must be absent or the Agent's own: the test driver places it"},
		{"defaults workspace relative", `{"agents":{"defaults":{"workspace":"workspace"}}}`, "", "agents.defaults.workspace must be absent"},
		{"defaults workspace not a string", `{"agents":{"defaults":{"workspace":{}}}}`, "", "agents.defaults.workspace must be absent"},
		{"entries not an object", `{"agents":{"entries":"` + secret + `"}}`, "", "test: agents.entries must be an object"},
		{"main workspace own", `{"agents":{"entries":{"main":{"workspace":"/agents/a1/workspace"}}}}`, "", ""},
		{"main workspace elsewhere", `{"agents":{"entries":{"main":{"workspace":"/tmp/` + secret + `"}}}}`, "", "test: agents.entries.main.workspace must be absent or the Agent's own"},
		{"heartbeat an object", `{"agents":{"defaults":{"heartbeat":{"every":"30m"}}}}`, "", ""},
		{"heartbeat not an object", `{"agents":{"defaults":{"heartbeat":"30m"}}}`, "", "test: agents.defaults.heartbeat must be an object"},

		{"agents.list", `{"agents":{"list":[{"id":"main"}]}}`, "", "test: only the native main agent is supported"},
		{"second agent", `{"agents":{"entries":{"main":{},"other":{}}}}`, "", "only the native main agent is supported"},
		{"entries without main", `{"agents":{"entries":{"other":{}}}}`, "", "only the native main agent is supported"},

		{"logging owned, an object", `{"logging":{"level":"debug"}}`, "/agents/a1/logs/openclaw.log", ""},
		{"logging owned, not an object", `{"logging":"` + secret + `"}`, "/agents/a1/logs/openclaw.log", "test: logging must be an object"},
		{"logging not owned, any value", `{"logging":"anything"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			doc, err := testDirect(tt.logFile).Parse([]byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse(%s) = %v, want accepted", tt.doc, err)
				}
				if doc == nil {
					t.Fatal("Parse accepted the document and returned no object")
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%s) accepted it, want a refusal containing %q", tt.doc, tt.want)
			}
			if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
				t.Errorf("Parse(%s) = %v, want a permanent %s", tt.doc, err, compute.CodeConfigurationInvalid)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) = %q, want it to contain %q", tt.doc, err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the refusal repeats a value of the document: %v", err)
			}
		})
	}
}

// TestDirectApply: what OCC controls wins, the rest passes unchanged
// (numbers as written), and the log cap is the document's value only when
// it is a positive integer below MaxLogBytes/6, which is at least 4096.
func TestDirectApply(t *testing.T) {
	const logFile = "/agents/a1/logs/openclaw.log"
	tests := []struct {
		name        string
		logFile     string
		maxLogBytes int64
		doc         string
		want        string
	}{
		{"everything OCC sets", "", 60_000,
			`{"gateway":{"mode":"local","auth":{"mode":"token","rateLimit":{"n":1.50}}},"ui":{"n":1.50},"agents":{"defaults":{"model":"m","heartbeat":{"target":"none"}}}}`,
			`{"gateway":{"mode":"local","bind":"loopback","port":18801,"auth":{"mode":"token","token":"tok","rateLimit":{"n":1.50}}},"ui":{"n":1.50},"agents":{"defaults":{"model":"m","workspace":"/agents/a1/workspace","heartbeat":{"target":"none","every":"0m"}}}}`},
		{"logging left alone without a log file", "", 60_000, `{"logging":{"maxFileBytes":99999999}}`,
			`{"gateway":{"mode":"local","bind":"loopback","port":18801,"auth":{"mode":"token","token":"tok"}},"agents":{"defaults":{"workspace":"/agents/a1/workspace","heartbeat":{"every":"0m"}}},"logging":{"maxFileBytes":99999999}}`},
		{"log cap is a sixth", logFile, 60_000, `{}`, logged(logFile, 10_000)},
		{"log cap at least 4096", logFile, 6_000, `{}`, logged(logFile, 4096)},
		{"smaller document value kept", logFile, 60_000, `{"logging":{"maxFileBytes":9999}}`, logged(logFile, 9999)},
		{"document value at the cap replaced", logFile, 60_000, `{"logging":{"maxFileBytes":10000}}`, logged(logFile, 10_000)},
		{"larger document value capped", logFile, 60_000, `{"logging":{"maxFileBytes":10001}}`, logged(logFile, 10_000)},
		{"zero capped", logFile, 60_000, `{"logging":{"maxFileBytes":0}}`, logged(logFile, 10_000)},
		{"fraction capped", logFile, 60_000, `{"logging":{"maxFileBytes":99.5}}`, logged(logFile, 10_000)},
		{"log file replaced", logFile, 60_000, `{"logging":{"file":"/tmp/elsewhere.log"}}`, logged(logFile, 10_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testDirect(tt.logFile)
			d.MaxLogBytes = tt.maxLogBytes
			doc, err := d.Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			d.Apply(doc, 18801, "tok")
			out, err := Encode(doc)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(out), "}\n") || !strings.Contains(string(out), "\n  \"") {
				t.Errorf("Encode does not indent:\n%s", out)
			}
			want, err := Decode([]byte(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(out)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rendered (-want +got):\n%s", diff)
			}
		})
	}
}

// logged is the rendered empty document of a Direct that owns the log.
func logged(file string, maxBytes int) string {
	b, _ := json.Marshal(map[string]any{"file": file, "maxFileBytes": maxBytes})
	return `{"gateway":{"mode":"local","bind":"loopback","port":18801,"auth":{"mode":"token","token":"tok"}},"agents":{"defaults":{"workspace":"/agents/a1/workspace","heartbeat":{"every":"0m"}}},"logging":` + string(b) + `}`
}

// TestEncodeKeepsHTML: the gateway reads the document as written, so
// characters HTML would escape stay as they are.
func TestEncodeKeepsHTML(t *testing.T) {
	out, err := Encode(map[string]any{"a": "<b>&"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("{\n  \"a\": \"<b>&\"\n}\n", string(out)); diff != "" {
		t.Errorf("Encode (-want +got):\n%s", diff)
	}
}

package agentgw

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeFrame: the payload decodes with the envelope in one pass; a
// payload of another shape keeps the envelope and is only marked, while a
// broken envelope or error is malformed whatever the payload.
func TestDecodeFrame(t *testing.T) {
	content := "soul\n"
	tests := []struct {
		name    string
		data    string
		want    frame[filePayload]
		wantErr error
	}{
		{"file answer",
			`{"type":"res","id":"2","ok":true,"payload":{"file":{"name":"SOUL.md","hash":"h","content":"soul\n"}}}`,
			frame[filePayload]{Type: "res", ID: "2", OK: true, Payload: filePayload{File: &fileEntry{Name: "SOUL.md", Hash: "h", Content: &content}}}, nil},
		{"answered error",
			`{"type":"res","id":"2","ok":false,"error":{"code":"INVALID_REQUEST","details":{"type":"agent_file_conflict","currentHash":"c"}}}`,
			frame[filePayload]{Type: "res", ID: "2", Error: &wireError{Code: "INVALID_REQUEST", Details: wireErrorDetails{Type: "agent_file_conflict", CurrentHash: "c"}}}, nil},
		{"event with an array payload",
			`{"type":"event","event":"presence","payload":[{"host":"h"}]}`,
			frame[filePayload]{Type: "event", Event: "presence", badPayload: true}, nil},
		{"answer whose file is a string",
			`{"type":"res","id":"2","ok":true,"payload":{"file":"SOUL.md"}}`,
			frame[filePayload]{Type: "res", ID: "2", OK: true, badPayload: true}, nil},
		{"payload mismatch before an envelope mismatch",
			`{"payload":{"file":1},"type":"res","id":2,"ok":true}`,
			frame[filePayload]{}, errMalformed},
		{"id of the wrong type", `{"type":"res","id":2,"ok":true,"payload":{}}`, frame[filePayload]{}, errMalformed},
		{"ok of the wrong type", `{"type":"res","id":"2","ok":"true"}`, frame[filePayload]{}, errMalformed},
		{"error of the wrong type", `{"type":"res","id":"2","ok":false,"error":{"code":7}}`, frame[filePayload]{}, errMalformed},
		{"not JSON", `not json {`, frame[filePayload]{}, errMalformed},
		{"trailing data", `{"type":"res"} {}`, frame[filePayload]{}, errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeFrame[filePayload]([]byte(tt.data))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(frame[filePayload]{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeHello: the hello-ok's role and scopes come out of the one pass,
// past the large blobs the gateway sends before them.
func TestDecodeHello(t *testing.T) {
	data := `{"type":"res","id":"1","ok":true,"payload":{"type":"hello-ok","protocol":4,` +
		`"features":{"methods":["agents.files.get","agents.files.set"]},"snapshot":{"presence":[{"host":"h"}],"health":{"ok":true}},` +
		`"auth":{"method":"token","role":"operator","scopes":["operator.admin","operator.read"]}}}`
	got, err := decodeFrame[helloOK]([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := helloOK{Type: "hello-ok", Protocol: 4, Auth: &helloAuth{Role: "operator", Scopes: []string{"operator.admin", "operator.read"}}}
	if diff := cmp.Diff(want, got.Payload); diff != "" || got.badPayload {
		t.Errorf("badPayload %v, (-want +got):\n%s", got.badPayload, diff)
	}
}

// FuzzDecodeFrame: whatever the gateway sends, decodeFrame does not panic,
// and a frame it accepts has the envelope that a decode with the payload
// kept raw finds.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"res","id":"2","ok":true,"payload":{"ok":true,"file":{"name":"SOUL.md","missing":false,"hash":"h","content":"x"}}}`,
		`{"type":"res","id":"2","ok":false,"error":{"code":"FORBIDDEN","message":"m","details":{"code":"MISSING_SCOPE","missingScope":"operator.admin"}}}`,
		`{"type":"event","event":"tick","payload":{"ts":1}}`,
		`{"type":"event","event":"presence","payload":[1,2]}`,
		`{"type":"res","id":"1","ok":true,"payload":{"type":"hello-ok","protocol":4,"auth":{"role":"operator","scopes":[]}}}`,
		`{"payload":{"file":1},"type":"res","id":2}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeFrame[filePayload](data)
		var env frame[json.RawMessage]
		envErr := json.Unmarshal(data, &env)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("err = %v, want errMalformed", err)
			}
			return
		}
		if envErr != nil {
			t.Fatalf("accepted a frame whose envelope does not decode: %v", envErr)
		}
		if got.Type != env.Type || got.ID != env.ID || got.Event != env.Event || got.OK != env.OK {
			t.Fatalf("envelope %+v, the raw decode's %+v", got, env)
		}
		if got.badPayload && got.Payload.File != nil {
			t.Fatalf("a bad payload left a file: %+v", got.Payload)
		}
	})
}

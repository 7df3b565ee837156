package gwtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
)

// TestFakePreConnectLimit: like the real gateway, the fake reads a frame
// of 64 KiB before hello-ok and closes the connection with 1009 (message
// too big) on one byte more. The connect frames are padded through
// userAgent, a string connect parameter of the protocol.
func TestFakePreConnectLimit(t *testing.T) {
	tests := []struct {
		name string
		size int
		want string
	}{
		{name: "connect of 64 KiB", size: 64 << 10, want: "res hello-ok"},
		{name: "connect of 64 KiB + 1", size: 64<<10 + 1, want: "closed with 1009"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
			c, _, err := websocket.Dial(ctx, g.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			// read returns the next frame as "event <name>" or "res
			// <payload type>", or how the connection ended.
			read := func() string {
				_, data, err := c.Read(ctx)
				if s := websocket.CloseStatus(err); s != -1 {
					return fmt.Sprintf("closed with %d", s)
				}
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				var f struct {
					Type, Event string
					Payload     json.RawMessage
				}
				if err := json.Unmarshal(data, &f); err != nil {
					t.Fatalf("frame %.100q: %v", data, err)
				}
				var p struct{ Type string }
				_ = json.Unmarshal(f.Payload, &p) // an event's payload may be no object
				return f.Type + " " + f.Event + p.Type
			}
			for got := read(); got != "event connect.challenge"; got = read() {
				if strings.HasPrefix(got, "closed") {
					t.Fatalf("before connect.challenge: %s", got)
				}
			}
			params := map[string]any{
				"minProtocol": 4, "maxProtocol": 4, "role": "operator", "scopes": []string{"operator.read"}, "caps": []string{},
				"client": map[string]any{"id": "gateway-client", "version": "gwtest", "platform": "linux", "mode": "backend"},
				"auth":   map[string]any{"token": g.Token}, "userAgent": "",
			}
			frame := map[string]any{"type": "req", "id": "1", "method": "connect", "params": params}
			data, err := json.Marshal(frame)
			if err != nil {
				t.Fatal(err)
			}
			params["userAgent"] = strings.Repeat("u", tt.size-len(data))
			if data, err = json.Marshal(frame); err != nil || len(data) != tt.size {
				t.Fatalf("connect frame of %d bytes (%v), want %d", len(data), err, tt.size)
			}
			if err := c.Write(ctx, websocket.MessageText, data); err != nil {
				t.Fatal(err)
			}
			got := read()
			for strings.HasPrefix(got, "event ") {
				got = read()
			}
			if got != tt.want {
				t.Errorf("after the connect frame: %q, want %q", got, tt.want)
			}
		})
	}
}

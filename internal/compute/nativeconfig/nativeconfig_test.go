package nativeconfig

import (
	"encoding/json"
	"testing"

	"github.com/openclaw/occ/internal/compute"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{`{}`, false},
		{`{"gateway":{"port":18789.50}}`, false},
		{`[1]`, true},
		{`null`, true},
		{`{} {}`, true},
		{`{"a":`, true},
	}
	for _, tc := range tests {
		doc, err := Decode([]byte(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("Decode(%s) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
				t.Errorf("Decode(%s) error %v is not permanent CONFIGURATION_INVALID", tc.in, err)
			}
		}
		_ = doc
	}
	// Numbers are kept exactly as written.
	doc, err := Decode([]byte(`{"n":18789.50}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	if string(b) != `{"n":18789.50}` {
		t.Errorf("round trip = %s, want the number unchanged", b)
	}
}

func TestObjectAndChild(t *testing.T) {
	doc := map[string]any{"gateway": map[string]any{"port": 1}, "agents": "oops"}
	if m, err := Object(doc, "gateway", "gateway"); err != nil || m["port"] != 1 {
		t.Errorf("Object(gateway) = %v, %v", m, err)
	}
	if m, err := Object(doc, "logging", "logging"); err != nil || len(m) != 0 {
		t.Errorf("Object(absent) = %v, %v; want an empty object", m, err)
	}
	if _, err := Object(doc, "agents", "agents"); err == nil {
		t.Error("Object(non-object) succeeded; want a conflict")
	}
	c := Child(doc, "logging")
	c["file"] = "x"
	if doc["logging"].(map[string]any)["file"] != "x" {
		t.Error("Child did not create the object in place")
	}
}

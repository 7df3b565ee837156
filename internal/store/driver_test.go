package store_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/store"
)

// TestRevisionForDriver checks the one conversion from a stored revision to
// what a driver is given, field by field, and that it fills every field of
// compute.Revision: a field added there without a source here fails.
func TestRevisionForDriver(t *testing.T) {
	r := store.Revision{
		ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Number: 3,
		ConfigurationID: "cfg_1", ConfigurationKind: store.ConfigurationKindAgent, ConfigurationGeneration: 7,
		Configuration: json.RawMessage(`{"a":1}`), ComputeDriverID: "test-driver", CreatedBy: "usr_1",
		CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	}
	got := r.ForDriver("support-bot")
	want := compute.Revision{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", AgentName: "support-bot",
		Number: 3, ConfigurationID: "cfg_1", ConfigurationGeneration: 7, Configuration: json.RawMessage(`{"a":1}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ForDriver (-want +got):\n%s", diff)
	}
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("compute.Revision.%s is not filled by Revision.ForDriver", v.Type().Field(i).Name)
		}
	}
}

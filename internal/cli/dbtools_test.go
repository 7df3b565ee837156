package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// TestAuditVerifyExportAndBackup runs the direct-database commands on a
// real SQLite data directory: verify passes, export streams the chain,
// backup copies it (and the copy verifies), and verify names the first
// broken link once a row is altered in the database.
func TestAuditVerifyExportAndBackup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := sqlstore.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var evs []store.AuditEvent
	for i := range 3 {
		e := store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: base.Add(time.Duration(i) * time.Hour), Kind: store.AuditMutation,
			ActorID: "usr_1", Action: "openclaw.namespaces.create", Resource: store.AuditResource{Kind: store.KindNamespace, ID: fmt.Sprintf("ns_%d", i)},
			Outcome: store.OutcomeSuccess}
		if err := st.AppendAuditEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	env := map[string]string{"OCC_LOG_LEVEL": "error"}
	runCmd := func(args ...string) (int, string, string) {
		h := harness{env: env}
		code := h.run(t, args...)
		return code, h.stdout.String(), h.stder.String()
	}

	code, out, errOut := runCmd("audit", "verify", "--data-dir", dir)
	if code != 0 || !strings.HasPrefix(out, "audit chain intact: 3 events chained, head seq 3 hash ") || errOut != "" {
		t.Fatalf("verify: %d %q %q", code, out, errOut)
	}

	code, out, errOut = runCmd("audit", "export", "--data-dir", dir, "--since", base.Add(time.Hour).Format(time.RFC3339))
	if code != 0 || errOut != "" {
		t.Fatalf("export: %d %q", code, errOut)
	}
	type line struct {
		ID    string `json:"id"`
		Chain struct {
			Seq      int64  `json:"seq"`
			PrevHash string `json:"prevHash"`
			Hash     string `json:"hash"`
		} `json:"chain"`
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("export line %q: %v", l, err)
		}
		got = append(got, v)
	}
	if len(got) != 2 || got[0].ID != evs[1].ID || got[1].ID != evs[2].ID || got[0].Chain.Seq != 2 || got[1].Chain.Seq != 3 ||
		got[1].Chain.PrevHash != got[0].Chain.Hash {
		t.Fatalf("export --since the second event = %+v", got)
	}

	backup := filepath.Join(t.TempDir(), "copy.db")
	if code, out, errOut := runCmd("backup", "--data-dir", dir, "--to", backup); code != 0 || out != "backup written to "+backup+"\n" {
		t.Fatalf("backup: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd("backup", "--data-dir", dir, "--to", backup); code != 1 || !strings.Contains(errOut, "file exists") {
		t.Errorf("backup over an existing file: %d %q; want exit 1", code, errOut)
	}
	if code, _, errOut := runCmd("backup", "--data-dir", dir); code != 2 || errOut != "occ: --to FILE is required\n" {
		t.Errorf("backup without --to: %d %q", code, errOut)
	}
	if code, out, _ := runCmd("audit", "verify", "--database-url", "sqlite://"+backup); code != 0 || !strings.Contains(out, "3 events chained") {
		t.Errorf("verify the backup: %d %q", code, out)
	}

	for _, q := range []string{`DROP TRIGGER audit_events_no_update`,
		`UPDATE audit_events SET action = 'openclaw.namespaces.delete' WHERE id = '` + evs[1].ID + `'`} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runCmd("audit", "verify", "--data-dir", dir)
	want := "occ: audit chain broken at seq 2 (event " + evs[1].ID + "): its contents do not match its hash (the event was altered)\n"
	if diff := cmp.Diff(want, errOut); code != 1 || out != "" || diff != "" {
		t.Errorf("verify after tampering: exit %d, stdout %q, stderr (-want +got):\n%s", code, out, diff)
	}
}

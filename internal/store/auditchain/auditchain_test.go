package auditchain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store"
)

func sample() store.AuditEvent {
	return store.AuditEvent{
		ID: "aud_1", OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 1_234_567, time.FixedZone("x", 3600)),
		Kind: "mutation", ActorID: "usr_1", Credential: "session", Action: "openclaw.agents.workspace.files.write",
		Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: "ns_1"},
		Outcome:  "success", AttemptID: "aud_0",
		Details: map[string]string{"workspaceFileName": "SOUL.md", "name": "ü:,"},
	}
}

// TestCanonicalForm pins the hashed bytes as docs/reliability.md defines
// them: a change here is a new chain version, never a silent edit.
func TestCanonicalForm(t *testing.T) {
	got := string(Canonical(sample(), 7, Genesis))
	want := "18:occ-audit-chain-v1,1:7,64:" + Genesis + ",5:aud_1,27:2026-12-01T09:00:00.001234Z,8:mutation," +
		"5:usr_1,7:session,0:,37:openclaw.agents.workspace.files.write,4:ns_1,5:agent,5:agt_1,7:success,0:,5:aud_0," +
		"1:2,4:name,4:ü:,,17:workspaceFileName,7:SOUL.md,"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("canonical form (-want +got):\n%s", diff)
	}
	if h := Hash(sample(), 7, Genesis); len(h) != 64 || h == Hash(sample(), 8, Genesis) {
		t.Errorf("hash %q does not depend on the position", h)
	}
}

func TestVerifier(t *testing.T) {
	link := func(e store.AuditEvent, seq int64, prev string) Entry {
		l := Link{Seq: seq, PrevHash: prev, Hash: Hash(e, seq, prev)}
		return Entry{Event: e, Link: &l}
	}
	a, b := sample(), sample()
	b.ID = "aud_2"
	ea := link(a, 1, Genesis)
	eb := link(b, 2, ea.Link.Hash)
	legacy := Entry{Event: store.AuditEvent{ID: "aud_old"}}
	cases := []struct {
		name    string
		entries []Entry
		headSeq int64
		want    *Break
	}{
		{"empty", nil, 0, nil},
		{"legacy then chain", []Entry{legacy, ea, eb}, 2, nil},
		{"legacy after chain", []Entry{ea, legacy}, 1, &Break{Seq: 2, EventID: "aud_old", Reason: "the event has no chain link but follows chained events"}},
		{"tail removed", []Entry{ea}, 2, &Break{Seq: 2, Reason: "the chain ends at seq 1 but its head says 2 events were appended"}},
		{"head behind", []Entry{ea, eb}, 1, &Break{Seq: 2, Reason: "the chain head does not match the last event"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := NewVerifier()
			var brk *Break
			for _, en := range tc.entries {
				if brk = v.Add(en); brk != nil {
					break
				}
			}
			headHash := Genesis
			if tc.headSeq == 1 {
				headHash = ea.Link.Hash
			} else if tc.headSeq == 2 {
				headHash = eb.Link.Hash
			}
			if brk == nil {
				brk = v.Finish(tc.headSeq, headHash)
			}
			if diff := cmp.Diff(tc.want, brk); diff != "" {
				t.Errorf("break (-want +got):\n%s", diff)
			}
		})
	}
}

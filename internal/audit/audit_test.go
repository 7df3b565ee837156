package audit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/store"
)

// recordingStore captures appended events; any other call panics.
type recordingStore struct {
	store.Store
	events   []store.AuditEvent
	subjects []string
}

func (r *recordingStore) AppendAuditEvent(ctx context.Context, e store.AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return err // as a real store's query would
	}
	r.events = append(r.events, e)
	r.subjects = append(r.subjects, authz.SubjectFrom(ctx).ID)
	return nil
}

func TestRecordDropsDetailsOffTheAllowlist(t *testing.T) {
	st := &recordingStore{}
	var logs bytes.Buffer
	now := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	r := NewRecorder(st, func() time.Time { return now }, func(context.Context) string { return "req_1" },
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := authz.WithSubject(context.Background(), &authz.Subject{ID: "usr_1", Kind: authz.KindUser, Credential: "session"})
	err := r.Mutation(ctx, nil, "openclaw.things.create", store.AuditResource{Kind: store.KindNamespace, ID: "ns_1"},
		map[string]string{"name": "team", "content": "SECRET-FILE-TEXT", "password": "hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	got := st.events[0]
	want := store.AuditEvent{ID: got.ID, OccurredAt: now.Truncate(time.Microsecond), Kind: store.AuditMutation, ActorID: "usr_1",
		Credential: "session", RequestID: "req_1", Action: "openclaw.things.create",
		Resource: store.AuditResource{Kind: store.KindNamespace, ID: "ns_1", NamespaceID: "ns_1"},
		Outcome:  store.OutcomeSuccess, Details: map[string]string{"name": "team"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if st.subjects[0] != authz.SystemAudit {
		t.Errorf("written as %q, want %q", st.subjects[0], authz.SystemAudit)
	}
	if strings.Contains(logs.String(), "SECRET-FILE-TEXT") || strings.Contains(logs.String(), "hunter2") {
		t.Error("a dropped detail's value reached the log")
	}
	if !strings.Contains(logs.String(), "content") {
		t.Error("the dropped key was not logged")
	}
}

func TestDenialsWaitForFlush(t *testing.T) {
	st := &recordingStore{}
	r := NewRecorder(st, nil, nil, nil)
	s := &authz.Subject{ID: "usr_2", Kind: authz.KindUser, Credential: "session"}
	ctx := WithDenialBuffer(context.Background())
	r.Denial(ctx, s, store.ActionDelete, authz.NamespaceResource("ns_9"), authz.Decision{Restricted: true, Restriction: "rst_1"})
	if len(st.events) != 0 {
		t.Fatal("a buffered denial was written before Flush")
	}
	r.Flush(ctx)
	if len(st.events) != 1 || st.events[0].ReasonCode != "RESTRICTED" || st.events[0].Outcome != store.OutcomeDenied {
		t.Fatalf("events after Flush = %+v", st.events)
	}
	r.Flush(ctx)
	if len(st.events) != 1 {
		t.Fatal("Flush wrote the same denial twice")
	}
}

// TestDenialOutlivesTheClient: a client that hangs up once its request was
// judged (its context cancelled) still leaves the denial on record, written
// with a deadline of its own.
func TestDenialOutlivesTheClient(t *testing.T) {
	st := &deadlineStore{}
	r := NewRecorder(st, nil, nil, nil)
	s := &authz.Subject{ID: "usr_3", Kind: authz.KindUser, Credential: "session"}
	ctx, cancel := context.WithCancel(WithDenialBuffer(context.Background()))
	r.Denial(ctx, s, store.ActionRead, authz.NamespaceResource("ns_1"), authz.Decision{})
	cancel()
	r.Flush(ctx)
	if len(st.events) != 1 || st.events[0].ReasonCode != "NO_GRANT" {
		t.Fatalf("events after the client left = %+v, want the one denial", st.events)
	}
	if st.left <= 0 || st.left > AfterTimeout {
		t.Errorf("written with %v left before its deadline, want (0, %v]", st.left, AfterTimeout)
	}
}

// TestFlushSharesOneDeadline: the denials a request left are written
// within one AfterTimeout together, not each with its own: the server's
// shutdown waits a bounded time for a cancelled request.
func TestFlushSharesOneDeadline(t *testing.T) {
	st := &deadlineStore{}
	r := NewRecorder(st, nil, nil, nil)
	s := &authz.Subject{ID: "usr_4", Kind: authz.KindUser, Credential: "session"}
	ctx := WithDenialBuffer(context.Background())
	for range 3 {
		r.Denial(ctx, s, store.ActionRead, authz.NamespaceResource("ns_1"), authz.Decision{})
	}
	r.Flush(ctx)
	if len(st.deadlines) != 3 {
		t.Fatalf("%d denials written, want 3", len(st.deadlines))
	}
	for i, dl := range st.deadlines {
		if !dl.Equal(st.deadlines[0]) {
			t.Errorf("denial %d written under deadline %v, the first under %v; want one deadline", i, dl, st.deadlines[0])
		}
	}
}

// deadlineStore is a recordingStore that also notes the time left before
// the append's deadline, and each append's deadline.
type deadlineStore struct {
	recordingStore
	left      time.Duration
	deadlines []time.Time
}

func (d *deadlineStore) AppendAuditEvent(ctx context.Context, e store.AuditEvent) error {
	if dl, ok := ctx.Deadline(); ok {
		d.left = time.Until(dl)
		d.deadlines = append(d.deadlines, dl)
	}
	return d.recordingStore.AppendAuditEvent(ctx, e)
}

// TestFailuresCountedOnlyWhenTheDatabaseFails: a write abandoned because
// its caller went away is not an audit write failure (nothing was changed
// without its record); one the database did not take in time is.
func TestFailuresCountedOnlyWhenTheDatabaseFails(t *testing.T) {
	var counted []string
	r := NewRecorder(&recordingStore{}, nil, nil, nil)
	r.ObserveFailures(failureFunc(func(kind string) { counted = append(counted, kind) }))
	e := store.AuditEvent{Kind: store.AuditMutation, Action: "openclaw.things.create", Outcome: store.OutcomeSuccess}

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Record(gone, nil, e); err == nil {
		t.Fatal("Record on a cancelled context succeeded")
	}
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if err := r.Record(late, nil, e); err == nil {
		t.Fatal("Record past its deadline succeeded")
	}
	if diff := cmp.Diff([]string{store.AuditMutation}, counted); diff != "" {
		t.Errorf("failures counted (-want +got):\n%s", diff)
	}
}

type failureFunc func(kind string)

func (f failureFunc) AuditWriteFailed(kind string) { f(kind) }

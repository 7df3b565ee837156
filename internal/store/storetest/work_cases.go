package storetest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

var revisionCases = []testCase{
	{"Revision/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		got, err := store.AllRevisions(ctx(t), h.Store, a.NamespaceID, a.ID)
		must(t, "ListRevisions", err)
		check(t, "ListRevisions of a new agent", []store.Revision{}, got)

		var revs []store.Revision
		for i := 1; i <= 3; i++ {
			in := f.newRevision(a)
			in.Number = 42 // ignored: the store numbers revisions
			out, err := h.Store.CreateRevision(ctx(t), in)
			must(t, "CreateRevision", err)
			want := in
			want.Number, want.CreatedAt = int64(i), stored(in.CreatedAt)
			check(t, fmt.Sprintf("CreateRevision #%d", i), want, out)
			revs = append(revs, want)
		}
		for _, want := range revs {
			got, err := h.Store.GetRevision(ctx(t), a.NamespaceID, a.ID, want.ID)
			must(t, "GetRevision", err)
			check(t, "GetRevision", want, got)
			if string(got.Configuration) != sampleDocument {
				t.Errorf("GetRevision().Configuration = %s, want exactly %s", got.Configuration, sampleDocument)
			}
		}
		list, err := store.AllRevisions(ctx(t), h.Store, a.NamespaceID, a.ID)
		must(t, "ListRevisions", err)
		check(t, "ListRevisions", revs, list)

		// Numbering is per Agent.
		b := f.agent()
		first, err := h.Store.CreateRevision(ctx(t), f.newRevision(b))
		must(t, "CreateRevision for another agent", err)
		if first.Number != 1 {
			t.Errorf("first revision of another agent has Number %d, want 1", first.Number)
		}

		_, err = h.Store.GetRevision(ctx(t), b.NamespaceID, b.ID, revs[0].ID)
		wantErr(t, "GetRevision through another agent", err, errkind.NotFound, "")
		_, err = h.Store.GetRevision(ctx(t), a.NamespaceID, a.ID, ids.New(ids.Revision))
		wantErr(t, "GetRevision unknown id", err, errkind.NotFound, "")
		dup := f.newRevision(a)
		dup.ID = revs[0].ID
		_, err = h.Store.CreateRevision(ctx(t), dup)
		wantErr(t, "CreateRevision with an existing id", err, errkind.Conflict, "")
		missing := f.newRevision(a)
		missing.AgentID = ids.New(ids.Agent)
		_, err = h.Store.CreateRevision(ctx(t), missing)
		wantErr(t, "CreateRevision for a missing agent", err, errkind.NotFound, "")
		noDoc := f.newRevision(a)
		noDoc.Configuration = nil
		_, err = h.Store.CreateRevision(ctx(t), noDoc)
		wantErr(t, "CreateRevision without a configuration document", err, errkind.Invalid, "")

		_, err = h.Store.MarkAgentDeleting(ctx(t), a.NamespaceID, a.ID, "usr_1", at(f.now()))
		must(t, "MarkAgentDeleting", err)
		_, err = h.Store.CreateRevision(ctx(t), f.newRevision(a))
		wantErr(t, "CreateRevision for a deleting agent", err, errkind.Conflict, errkind.CodeAgentDeleting)
	}},
	{"Revision/ConcurrentNumbers", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		const n = 8
		ins := make([]store.Revision, n)
		for i := range ins {
			ins[i] = f.newRevision(a)
		}
		numbers := make(chan int64, n)
		var wg sync.WaitGroup
		for _, in := range ins {
			wg.Add(1)
			go func(in store.Revision) {
				defer wg.Done()
				out, err := h.Store.CreateRevision(ctx(t), in)
				if err != nil {
					t.Errorf("concurrent CreateRevision: %v", err)
					return
				}
				numbers <- out.Number
			}(in)
		}
		wg.Wait()
		close(numbers)
		var got []int64
		for num := range numbers {
			got = append(got, num)
		}
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		check(t, "revision numbers of concurrent deployments", []int64{1, 2, 3, 4, 5, 6, 7, 8}, got)
	}},
}

// claimAt claims work at instant now with a one-minute lease.
func claimAt(t *testing.T, h Harness, token string, now time.Time) (store.WorkItem, bool) {
	t.Helper()
	w, ok, err := h.Store.ClaimWork(ctx(t), store.Claim{Token: token, Now: now, Lease: time.Minute})
	must(t, "ClaimWork", err)
	return w, ok
}

// claimed is what a stored item looks like after a claim at now.
func claimed(w store.WorkItem, token string, now time.Time, attempts int) store.WorkItem {
	w.State, w.ClaimToken, w.Attempts = store.WorkRunning, token, attempts
	w.LeaseExpiresAt, w.UpdatedAt = stored(now.Add(time.Minute)), stored(now)
	return w
}

var workCases = []testCase{
	{"Work/EnqueueGet", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		rev := f.revision(a)
		in := f.newWork(a, store.WorkRevisionDeploy)
		in.RevisionID, in.IdempotencyKey, in.State = rev.ID, rev.ID+":reconcile", ""
		got, err := h.Store.EnqueueWork(ctx(t), in)
		must(t, "EnqueueWork", err)
		want := in
		want.State = store.WorkQueued
		want.AvailableAt, want.CreatedAt, want.UpdatedAt = stored(in.AvailableAt), stored(in.CreatedAt), stored(in.UpdatedAt)
		check(t, "EnqueueWork result", want, got)
		byID, err := h.Store.GetWork(ctx(t), in.ID)
		must(t, "GetWork", err)
		check(t, "GetWork", want, byID)
		byKey, err := h.Store.GetWorkByKey(ctx(t), in.IdempotencyKey)
		must(t, "GetWorkByKey", err)
		check(t, "GetWorkByKey", want, byKey)

		// The same key again returns the existing item unchanged.
		again := f.newWork(a, store.WorkAgentStop)
		again.IdempotencyKey = in.IdempotencyKey
		got, err = h.Store.EnqueueWork(ctx(t), again)
		must(t, "EnqueueWork with an existing key", err)
		check(t, "EnqueueWork with an existing key", want, got)
		if n := rawCount(t, h, `SELECT count(*) FROM controller_work`); n != 1 {
			t.Errorf("controller_work has %d rows, want 1", n)
		}

		// Namespace work has no Agent.
		nsWork := store.WorkItem{
			ID: ids.New(ids.WorkItem), Kind: store.WorkNamespaceReconcile, IdempotencyKey: a.NamespaceID + ":reconcile",
			NamespaceID: a.NamespaceID, State: store.WorkQueued, AvailableAt: at(5), CreatedAt: at(5), UpdatedAt: at(5),
		}
		got, err = h.Store.EnqueueWork(ctx(t), nsWork)
		must(t, "EnqueueWork namespace work", err)
		if got.AgentID != "" || got.RevisionID != "" || got.ActorID != "" {
			t.Errorf("namespace work came back with agent %q, revision %q, actor %q; want none", got.AgentID, got.RevisionID, got.ActorID)
		}

		dupID := f.newWork(a, store.WorkAgentStop)
		dupID.ID = in.ID
		_, err = h.Store.EnqueueWork(ctx(t), dupID)
		wantErr(t, "EnqueueWork with an existing id and a new key", err, errkind.Conflict, "")
		bad := f.newWork(a, store.WorkAgentStop)
		bad.State = "paused"
		_, err = h.Store.EnqueueWork(ctx(t), bad)
		wantErr(t, "EnqueueWork with an unknown state", err, errkind.Invalid, "")
		_, err = h.Store.GetWork(ctx(t), ids.New(ids.WorkItem))
		wantErr(t, "GetWork unknown id", err, errkind.NotFound, "")
		_, err = h.Store.GetWorkByKey(ctx(t), "nope")
		wantErr(t, "GetWorkByKey unknown key", err, errkind.NotFound, "")
	}},
	{"Work/ClaimOrder", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		a, b, c := f.agent(cfg), f.agent(cfg), f.agent(cfg)
		a1 := f.work(a, store.WorkRevisionDeploy)
		a2 := f.work(a, store.WorkAgentStop)
		b1 := f.work(b, store.WorkRevisionDeploy)
		n := f.now()
		nsWork, err := h.Store.EnqueueWork(ctx(t), store.WorkItem{
			ID: ids.New(ids.WorkItem), Kind: store.WorkNamespaceReconcile, IdempotencyKey: "ns:reconcile",
			NamespaceID: cfg.NamespaceID, AvailableAt: at(n), CreatedAt: at(n), UpdatedAt: at(n),
		})
		must(t, "EnqueueWork namespace work", err)
		later := f.newWork(c, store.WorkRevisionDeploy)
		later.AvailableAt = at(500)
		later, err = h.Store.EnqueueWork(ctx(t), later)
		must(t, "EnqueueWork later", err)

		now := at(100)
		_, _, err = h.Store.ClaimWork(ctx(t), store.Claim{Now: now, Lease: time.Minute})
		wantErr(t, "ClaimWork without a token", err, errkind.Invalid, "")

		got, ok := claimAt(t, h, "tok-1", now)
		if !ok {
			t.Fatalf("first ClaimWork found nothing")
		}
		check(t, "first claim (oldest item)", claimed(a1, "tok-1", now, 1), got)
		// a2 waits for a1 (same Agent); b1 and the namespace work may go.
		for i, want := range []store.WorkItem{b1, nsWork} {
			tok := fmt.Sprintf("tok-%d", i+2)
			got, ok := claimAt(t, h, tok, now)
			if !ok {
				t.Fatalf("claim %d found nothing, want %s", i+2, want.Kind)
			}
			check(t, fmt.Sprintf("claim %d", i+2), claimed(want, tok, now, 1), got)
		}
		if got, ok := claimAt(t, h, "tok-x", now); ok {
			t.Fatalf("ClaimWork claimed %s (%s) while only blocked or future work remains", got.ID, got.Kind)
		}
		must(t, "FinishWork a1", h.Store.FinishWork(ctx(t), a1.ID, "tok-1", store.WorkSucceeded, "", "", now))
		got, ok = claimAt(t, h, "tok-5", now)
		if !ok || got.ID != a2.ID {
			t.Fatalf("claim after a1 finished = %s (found %v), want a2 %s", got.ID, ok, a2.ID)
		}
		// Once everything else is finished, the future item is claimed when due.
		for _, done := range []struct{ id, tok string }{{b1.ID, "tok-2"}, {nsWork.ID, "tok-3"}, {a2.ID, "tok-5"}} {
			must(t, "FinishWork", h.Store.FinishWork(ctx(t), done.id, done.tok, store.WorkSucceeded, "", "", now))
		}
		if got, ok := claimAt(t, h, "tok-x", at(499)); ok {
			t.Fatalf("claimed %s before it was due", got.ID)
		}
		got, ok = claimAt(t, h, "tok-6", at(500))
		if !ok || got.ID != later.ID {
			t.Fatalf("claim once due = %s (found %v), want %s", got.ID, ok, later.ID)
		}
	}},
	// Two requests for one Agent can read their clocks in one order and
	// commit in the other (the Agent's row lock decides), and replicas'
	// clocks differ: the item queued second still runs second, never
	// beside or before the first.
	{"Work/QueueOrderFollowsCommits", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent(f.configuration(f.namespace()))
		second := f.newWork(a, store.WorkAgentStop)
		first := f.newWork(a, store.WorkRevisionDeploy)
		first.CreatedAt, first.AvailableAt = second.CreatedAt.Add(time.Second), second.CreatedAt
		first, err := h.Store.EnqueueWork(ctx(t), first)
		must(t, "EnqueueWork (the later clock, committed first)", err)
		now := first.CreatedAt.Add(time.Minute)
		got, ok := claimAt(t, h, "tok-1", now)
		if !ok || got.ID != first.ID {
			t.Fatalf("first claim = %s (found %v), want the item committed first", got.ID, ok)
		}
		second, err = h.Store.EnqueueWork(ctx(t), second)
		must(t, "EnqueueWork (the earlier clock, committed second)", err)
		if !second.CreatedAt.After(first.CreatedAt) {
			t.Errorf("the item committed second was created at %v, not after the first's %v", second.CreatedAt, first.CreatedAt)
		}
		if got, ok := claimAt(t, h, "tok-2", now); ok {
			t.Fatalf("claimed %s (%s) while the Agent's first item runs", got.ID, got.Kind)
		}
		must(t, "FinishWork", h.Store.FinishWork(ctx(t), first.ID, "tok-1", store.WorkSucceeded, "", "", now))
		got, ok = claimAt(t, h, "tok-3", now)
		if !ok || got.ID != second.ID {
			t.Fatalf("claim after the first finished = %s (found %v), want the second %s", got.ID, ok, second.ID)
		}
	}},
	// A Namespace's own items (no Agent) run in order, one at a time, like
	// an Agent's: its deletion never runs beside its reconcile, which
	// would create again what the deletion removes. Another Namespace's
	// work and its Agents' work are not held up.
	{"Work/NamespaceWorkInOrder", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns, other := f.namespace(), f.namespace()
		a := f.agent(f.configuration(ns))
		nsItem := func(ns store.Namespace, kind string, created time.Time) store.WorkItem {
			w, err := h.Store.EnqueueWork(ctx(t), store.WorkItem{
				ID: ids.New(ids.WorkItem), Kind: kind, IdempotencyKey: ns.ID + ":" + kind,
				NamespaceID: ns.ID, AvailableAt: created, CreatedAt: created, UpdatedAt: created,
			})
			must(t, "EnqueueWork "+kind, err)
			return w
		}
		n := at(f.now())
		reconcile := nsItem(ns, store.WorkNamespaceReconcile, n)
		now := n.Add(time.Minute)
		got, ok := claimAt(t, h, "tok-1", now)
		if !ok || got.ID != reconcile.ID {
			t.Fatalf("first claim = %s (found %v), want the reconcile", got.ID, ok)
		}
		// Queued while the reconcile runs, with a clock behind it.
		del := nsItem(ns, store.WorkNamespaceDelete, n.Add(-time.Second))
		if !del.CreatedAt.After(reconcile.CreatedAt) {
			t.Errorf("the delete queued second was created at %v, not after the reconcile's %v", del.CreatedAt, reconcile.CreatedAt)
		}
		otherItem := nsItem(other, store.WorkNamespaceReconcile, n)
		agentItem := f.work(a, store.WorkRevisionDeploy)
		var claimedIDs []string
		for i := range 3 {
			got, ok := claimAt(t, h, fmt.Sprintf("tok-x%d", i), now)
			if !ok {
				break
			}
			claimedIDs = append(claimedIDs, got.ID)
		}
		sort.Strings(claimedIDs)
		want := []string{otherItem.ID, agentItem.ID}
		sort.Strings(want)
		check(t, "claimed while the Namespace's reconcile runs", want, claimedIDs)
		must(t, "FinishWork reconcile", h.Store.FinishWork(ctx(t), reconcile.ID, "tok-1", store.WorkSucceeded, "", "", now))
		got, ok = claimAt(t, h, "tok-2", now)
		if !ok || got.ID != del.ID {
			t.Fatalf("claim after the reconcile finished = %s (found %v), want the delete %s", got.ID, ok, del.ID)
		}
	}},
	{"Work/LeaseRenewFinish", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		w := f.work(a, store.WorkRevisionDeploy)
		now := at(100)
		if _, ok := claimAt(t, h, "tok-1", now); !ok {
			t.Fatalf("ClaimWork found nothing")
		}
		if got, ok := claimAt(t, h, "tok-2", now.Add(30*time.Second)); ok {
			t.Fatalf("claimed %s while its lease is live", got.ID)
		}
		must(t, "RenewWork", h.Store.RenewWork(ctx(t), w.ID, "tok-1", now.Add(2*time.Minute)))
		if got, ok := claimAt(t, h, "tok-2", now.Add(90*time.Second)); ok {
			t.Fatalf("claimed %s while its renewed lease is live", got.ID)
		}
		// The lease expires: another worker takes over.
		takeover := now.Add(3 * time.Minute)
		got, ok := claimAt(t, h, "tok-2", takeover)
		if !ok {
			t.Fatalf("ClaimWork did not take over an expired lease")
		}
		check(t, "claim of an expired lease", claimed(w, "tok-2", takeover, 2), got)

		// The first worker's token no longer works.
		wantErr(t, "RenewWork with a lost claim", h.Store.RenewWork(ctx(t), w.ID, "tok-1", takeover), errkind.Conflict, "")
		wantErr(t, "RetryWork with a lost claim", h.Store.RetryWork(ctx(t), w.ID, "tok-1", takeover, store.WorkAttempt{}, true), errkind.Conflict, "")
		wantErr(t, "FinishWork with a lost claim",
			h.Store.FinishWork(ctx(t), w.ID, "tok-1", store.WorkSucceeded, "", "", takeover), errkind.Conflict, "")
		wantErr(t, "RenewWork unknown id", h.Store.RenewWork(ctx(t), ids.New(ids.WorkItem), "tok-2", takeover), errkind.NotFound, "")
		wantErr(t, "FinishWork to a non-final state",
			h.Store.FinishWork(ctx(t), w.ID, "tok-2", store.WorkRunning, "", "", takeover), errkind.Invalid, "")

		done := takeover.Add(time.Second)
		must(t, "FinishWork", h.Store.FinishWork(ctx(t), w.ID, "tok-2", store.WorkFailedPermanent,
			"WORKSPACE_SETUP_UNSUPPORTED", "the compute driver cannot stage workspace files", done))
		got, err := h.Store.GetWork(ctx(t), w.ID)
		must(t, "GetWork", err)
		want := w
		want.State, want.Attempts, want.ReasonCode = store.WorkFailedPermanent, 2, "WORKSPACE_SETUP_UNSUPPORTED"
		want.LastError = "the compute driver cannot stage workspace files"
		want.CompletedAt, want.UpdatedAt = stored(done), stored(done)
		check(t, "finished work item", want, got)
		wantErr(t, "FinishWork twice",
			h.Store.FinishWork(ctx(t), w.ID, "tok-2", store.WorkSucceeded, "", "", done), errkind.Conflict, "")
		if got, ok := claimAt(t, h, "tok-3", done.Add(time.Hour)); ok {
			t.Fatalf("claimed finished work %s", got.ID)
		}
	}},
	{"Work/Retry", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		w := f.work(a, store.WorkRevisionDeploy)
		now := at(100)
		if _, ok := claimAt(t, h, "tok-1", now); !ok {
			t.Fatalf("ClaimWork found nothing")
		}
		attempt := store.WorkAttempt{Code: "AGENT_GATEWAY_UNAVAILABLE", Message: "gateway not ready", At: now.Add(10 * time.Second)}
		retryAt := now.Add(time.Minute)
		must(t, "RetryWork", h.Store.RetryWork(ctx(t), w.ID, "tok-1", retryAt, attempt, true))
		got, err := h.Store.GetWork(ctx(t), w.ID)
		must(t, "GetWork", err)
		want := w
		want.Attempts, want.AvailableAt, want.LastError = 1, stored(retryAt), attempt.Message
		want.LastAttempt = &store.WorkAttempt{Code: attempt.Code, Message: attempt.Message, At: stored(attempt.At)}
		want.UpdatedAt = stored(attempt.At)
		check(t, "work item after RetryWork", want, got)

		if got, ok := claimAt(t, h, "tok-2", now.Add(30*time.Second)); ok {
			t.Fatalf("claimed %s before its retry time", got.ID)
		}
		got, ok := claimAt(t, h, "tok-2", retryAt)
		if !ok {
			t.Fatalf("ClaimWork did not find the retried item")
		}
		check(t, "second claim", claimed(want, "tok-2", retryAt, 2), got)

		// Not counted: the second claim's increment is taken back, and
		// the third claim counts 2 again.
		later := retryAt.Add(time.Minute)
		must(t, "RetryWork not counted", h.Store.RetryWork(ctx(t), w.ID, "tok-2", later, attempt, false))
		got, err = h.Store.GetWork(ctx(t), w.ID)
		must(t, "GetWork", err)
		if got.Attempts != 1 {
			t.Errorf("Attempts after a retry not counted = %d, want 1", got.Attempts)
		}
		got, ok = claimAt(t, h, "tok-3", later)
		if !ok || got.Attempts != 2 {
			t.Fatalf("ClaimWork after a retry not counted = %d attempts, %v; want 2, true", got.Attempts, ok)
		}
	}},
	{"Work/CancelAgentWork", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		a, b := f.agent(cfg), f.agent(cfg)
		running := f.work(a, store.WorkRevisionDeploy)
		if got, ok := claimAt(t, h, "tok-1", at(100)); !ok || got.ID != running.ID {
			t.Fatalf("ClaimWork = %s, %v; want %s", got.ID, ok, running.ID)
		}
		deploy := f.work(a, store.WorkRevisionDeploy)
		stop := f.work(a, store.WorkAgentStop)
		otherAgent := f.work(b, store.WorkRevisionDeploy)

		now := at(200)
		n, err := h.Store.CancelAgentWork(ctx(t), a.NamespaceID, a.ID, nil, now)
		must(t, "CancelAgentWork without kinds", err)
		if n != 0 {
			t.Errorf("CancelAgentWork without kinds = %d, want 0", n)
		}
		n, err = h.Store.CancelAgentWork(ctx(t), a.NamespaceID, a.ID, []string{store.WorkRevisionDeploy}, now)
		must(t, "CancelAgentWork", err)
		if n != 1 {
			t.Errorf("CancelAgentWork = %d, want 1", n)
		}
		got, err := h.Store.GetWork(ctx(t), deploy.ID)
		must(t, "GetWork", err)
		want := deploy
		want.State, want.CompletedAt, want.UpdatedAt = store.WorkCancelled, stored(now), stored(now)
		check(t, "cancelled work item", want, got)
		for _, tt := range []struct {
			w     store.WorkItem
			state store.WorkState
		}{{running, store.WorkRunning}, {stop, store.WorkQueued}, {otherAgent, store.WorkQueued}} {
			got, err := h.Store.GetWork(ctx(t), tt.w.ID)
			must(t, "GetWork", err)
			if got.State != tt.state {
				t.Errorf("work %s (%s) is %s after CancelAgentWork, want %s", tt.w.ID, tt.w.Kind, got.State, tt.state)
			}
		}
	}},
	{"Work/ExpediteAgentWork", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		a, b := f.agent(cfg), f.agent(cfg)
		// a's first item waits for a readiness recheck an hour away; its
		// second is queued behind it; b's item waits too.
		first := f.work(a, store.WorkRevisionDeploy)
		second := f.work(a, store.WorkAgentStop)
		other := f.work(b, store.WorkRevisionDeploy)
		now := at(100)
		later := now.Add(time.Hour)
		for _, w := range []store.WorkItem{first, other} {
			if got, ok := claimAt(t, h, "tok-"+w.ID, now); !ok || got.ID != w.ID {
				t.Fatalf("ClaimWork = %s, %v; want %s", got.ID, ok, w.ID)
			}
			must(t, "RetryWork", h.Store.RetryWork(ctx(t), w.ID, "tok-"+w.ID, later,
				store.WorkAttempt{Code: "AGENT_GATEWAY_UNAVAILABLE", Message: "not ready", At: now}, false))
		}
		if got, ok := claimAt(t, h, "tok-x", now.Add(time.Second)); ok {
			t.Fatalf("claimed %s before anything was expedited", got.ID)
		}

		signal := now.Add(2 * time.Second)
		n, err := h.Store.ExpediteAgentWork(ctx(t), a.NamespaceID, a.ID, signal)
		must(t, "ExpediteAgentWork", err)
		if n != 1 {
			t.Errorf("ExpediteAgentWork = %d, want 1 (the waiting item; the second was already available)", n)
		}
		got, err := h.Store.GetWork(ctx(t), first.ID)
		must(t, "GetWork", err)
		if !got.AvailableAt.Equal(stored(signal)) || !got.UpdatedAt.Equal(stored(signal)) || got.State != store.WorkQueued {
			t.Errorf("expedited item: state %s, available %v, updated %v; want queued, both %v",
				got.State, got.AvailableAt, got.UpdatedAt, stored(signal))
		}
		for _, w := range []store.WorkItem{second, other} {
			got, err := h.Store.GetWork(ctx(t), w.ID)
			must(t, "GetWork", err)
			if got.State != store.WorkQueued {
				t.Errorf("item %s is %s after another item was expedited, want queued", w.ID, got.State)
			}
			if w.ID == other.ID && !got.AvailableAt.Equal(stored(later)) {
				t.Errorf("the other Agent's item is available at %v, want %v", got.AvailableAt, stored(later))
			}
			if w.ID == second.ID && !got.AvailableAt.Equal(second.AvailableAt) {
				t.Errorf("the queued-behind item moved to %v, want %v", got.AvailableAt, second.AvailableAt)
			}
		}
		// The expedited item is claimed first; the one behind it waits for it.
		if got, ok := claimAt(t, h, "tok-2", signal); !ok || got.ID != first.ID {
			t.Fatalf("ClaimWork after ExpediteAgentWork = %s, %v; want %s", got.ID, ok, first.ID)
		}
		n, err = h.Store.ExpediteAgentWork(ctx(t), a.NamespaceID, a.ID, signal.Add(time.Second))
		must(t, "ExpediteAgentWork of claimed work", err)
		if n != 0 {
			t.Errorf("ExpediteAgentWork of a claimed item and an available one = %d, want 0", n)
		}
	}},
	{"Work/ConcurrentClaims", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		const items, workers = 6, 10
		for i := 0; i < items; i++ {
			f.work(f.agent(cfg), store.WorkRevisionDeploy)
		}
		var mu sync.Mutex
		claimedBy := map[string]string{}
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func(token string) {
				defer wg.Done()
				for {
					w, ok, err := h.Store.ClaimWork(ctx(t), store.Claim{Token: token, Now: at(100), Lease: time.Minute})
					if err != nil {
						t.Errorf("concurrent ClaimWork: %v", err)
						return
					}
					if !ok {
						return
					}
					mu.Lock()
					if prev, dup := claimedBy[w.ID]; dup {
						t.Errorf("work %s claimed by %s and %s", w.ID, prev, token)
					}
					claimedBy[w.ID] = token
					mu.Unlock()
				}
			}(fmt.Sprintf("worker-%d", i))
		}
		wg.Wait()
		if len(claimedBy) != items {
			t.Errorf("claimed %d items, want %d", len(claimedBy), items)
		}
	}},
}

// activation prepares an Agent that wants to run, with a pending setup, a
// revision and a claimed deploy work item.
type activation struct {
	agent store.Agent
	setup store.WorkspaceSetup
	rev   store.Revision
	work  store.WorkItem
	in    store.Activation
}

func newActivation(t *testing.T, h Harness, f *fixture) activation {
	t.Helper()
	a, ws := f.agentWithSetup()
	_, err := h.Store.SetAgentRuntimeState(ctx(t), a.NamespaceID, a.ID, store.RuntimeRunning, at(f.now()))
	must(t, "SetAgentRuntimeState", err)
	rev := f.revision(a)
	w := f.newWork(a, store.WorkRevisionDeploy)
	w.RevisionID = rev.ID
	w, err = h.Store.EnqueueWork(ctx(t), w)
	must(t, "EnqueueWork", err)
	token := "tok-" + w.ID
	if got, ok := claimAt(t, h, token, at(300)); !ok || got.ID != w.ID {
		t.Fatalf("ClaimWork = %s, %v; want %s", got.ID, ok, w.ID)
	}
	return activation{
		agent: a, setup: ws, rev: rev, work: w,
		in: store.Activation{
			NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: rev.ID, WorkID: w.ID,
			ClaimToken: token, SetupID: ws.ID, Now: at(300).Add(10 * time.Second),
		},
	}
}

var activationCases = []testCase{
	{"Activate/Success", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		act := newActivation(t, h, f)
		must(t, "ActivateRevision", h.Store.ActivateRevision(ctx(t), act.in))

		a, err := h.Store.GetAgent(ctx(t), act.agent.NamespaceID, act.agent.ID)
		must(t, "GetAgent", err)
		if a.ActiveRevisionID != act.rev.ID || !a.UpdatedAt.Equal(stored(act.in.Now)) {
			t.Errorf("agent after activation: active revision %q updated %v, want %q and %v",
				a.ActiveRevisionID, a.UpdatedAt, act.rev.ID, stored(act.in.Now))
		}
		ws, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetWorkspaceSetup", err)
		check(t, "setup after activation",
			store.WorkspaceSetup{ID: act.setup.ID, NamespaceID: a.NamespaceID, AgentID: a.ID, DefaultsID: defaultsID, Completed: true}, ws)
		w, err := h.Store.GetWork(ctx(t), act.work.ID)
		must(t, "GetWork", err)
		if w.State != store.WorkRunning || w.ClaimToken != act.in.ClaimToken {
			t.Errorf("work item after activation is %s with token %q; want still running and claimed", w.State, w.ClaimToken)
		}
		// Repeating the activation (a worker that crashed before finishing)
		// succeeds and changes nothing; then the worker finishes the item.
		must(t, "ActivateRevision again", h.Store.ActivateRevision(ctx(t), act.in))
		ws2, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetWorkspaceSetup", err)
		check(t, "setup after a repeated activation", ws, ws2)
		must(t, "FinishWork", h.Store.FinishWork(ctx(t), act.work.ID, act.in.ClaimToken, store.WorkSucceeded, "", "", act.in.Now))
		w, err = h.Store.GetWork(ctx(t), act.work.ID)
		must(t, "GetWork", err)
		want := act.work
		want.State, want.Attempts = store.WorkSucceeded, 1
		want.CompletedAt, want.UpdatedAt = stored(act.in.Now), stored(act.in.Now)
		check(t, "work item after finishing", want, w)

		// An Agent without a setup activates without SetupID.
		b := newActivation(t, h, f)
		b.in.SetupID = ""
		must(t, "ActivateRevision without setup", h.Store.ActivateRevision(ctx(t), b.in))
		ws, err = h.Store.GetWorkspaceSetup(ctx(t), b.agent.NamespaceID, b.agent.ID)
		must(t, "GetWorkspaceSetup", err)
		if ws.Completed {
			t.Errorf("ActivateRevision without SetupID completed the setup")
		}
	}},
	{"Activate/RefusedLeavesNothingChanged", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		tests := []struct {
			name    string
			prepare func(act *activation)
		}{
			{"lost claim", func(act *activation) { act.in.ClaimToken = "tok-other" }},
			{"expired lease", func(act *activation) { act.in.Now = at(300).Add(time.Minute) }},
			{"agent stopped", func(act *activation) {
				_, err := h.Store.SetAgentRuntimeState(ctx(t), act.agent.NamespaceID, act.agent.ID, store.RuntimeStopped, at(301))
				must(t, "SetAgentRuntimeState", err)
			}},
			{"agent deleting", func(act *activation) {
				_, err := h.Store.MarkAgentDeleting(ctx(t), act.agent.NamespaceID, act.agent.ID, "usr_1", at(301))
				must(t, "MarkAgentDeleting", err)
			}},
			{"revision of another agent", func(act *activation) { act.in.RevisionID = f.revision(f.agent()).ID }},
			{"unknown setup", func(act *activation) { act.in.SetupID = ids.New(ids.WorkspaceSetup) }},
		}
		for _, tt := range tests {
			act := newActivation(t, h, f)
			tt.prepare(&act)
			wantErr(t, "ActivateRevision with "+tt.name, h.Store.ActivateRevision(ctx(t), act.in), errkind.Conflict, "")

			a, err := h.Store.GetAgent(ctx(t), act.agent.NamespaceID, act.agent.ID)
			must(t, "GetAgent", err)
			if a.ActiveRevisionID != "" {
				t.Errorf("%s: agent has active revision %q after a refused activation", tt.name, a.ActiveRevisionID)
			}
			ws, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
			must(t, "GetWorkspaceSetup", err)
			check(t, tt.name+": setup after a refused activation", act.setup, ws)
			w, err := h.Store.GetWork(ctx(t), act.work.ID)
			must(t, "GetWork", err)
			if w.State != store.WorkRunning || w.ClaimToken != "tok-"+act.work.ID {
				t.Errorf("%s: work item is %s with token %q after a refused activation, want still running and claimed", tt.name, w.State, w.ClaimToken)
			}
		}
	}},
}

package authz

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store"
)

// grantStore is an inner store holding one subject's grants in memory and
// counting how often the authorizer reads them. Every other method panics
// (the embedded nil interface).
type grantStore struct {
	store.Store
	grants []store.Grant
	reads  int
	failTx bool
}

func (g *grantStore) ListGrants(context.Context, string) ([]store.Grant, error) {
	g.reads++
	return append([]store.Grant(nil), g.grants...), nil
}

func (g *grantStore) ListSubjectRestrictions(context.Context, string) ([]store.Restriction, error) {
	return nil, nil
}

func (g *grantStore) ListAccess(ctx context.Context, subjectID string) (store.Access, error) {
	grants, _ := g.ListGrants(ctx, subjectID)
	return store.Access{Grants: grants}, nil
}

func (g *grantStore) DeleteAccessBinding(_ context.Context, id string) error {
	for i, gr := range g.grants {
		if gr.Binding.ID == id {
			g.grants = append(g.grants[:i], g.grants[i+1:]...)
		}
	}
	return nil
}

func (g *grantStore) CreateAccessBinding(_ context.Context, b store.AccessBinding) error {
	g.grants = append(g.grants, store.Grant{Binding: b, Permissions: []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}})
	return nil
}

// InTx runs fn on the same store and then "rolls back" to the grants
// before it when failTx is set.
func (g *grantStore) InTx(_ context.Context, fn func(store.Store) error) error {
	before := append([]store.Grant(nil), g.grants...)
	err := fn(g)
	if err == nil && g.failTx {
		err = errors.New("commit failed")
	}
	if err != nil {
		g.grants = before
	}
	return err
}

// memoFixture is the memo tests' set-up: a user holding one grant (to
// administer the installation and read Agents) in a grantStore behind the
// layer w, and decide, which checks reading agent through w.
func memoFixture(t *testing.T) (admin store.Grant, agent Resource, subject *Subject, inner *grantStore, w *Store,
	decide func(context.Context) Decision) {
	admin = store.Grant{Binding: store.AccessBinding{ID: "rb_admin"}, Permissions: []store.Permission{
		{Action: store.ActionAdminister, ResourceKind: store.KindInstallation},
		{Action: store.ActionRead, ResourceKind: store.KindAgent},
	}}
	agent = Resource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: "ns_1"}
	subject = &Subject{ID: "usr_1", Kind: KindUser, Credential: "session"}
	inner = &grantStore{grants: []store.Grant{admin}}
	w = Wrap(inner, nil)
	decide = func(ctx context.Context) Decision {
		t.Helper()
		d, err := w.Decide(ctx, store.ActionRead, agent)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	return admin, agent, subject, inner, w, decide
}

// TestAccessIsReadOncePerRequest: the checks of one request (one context
// from WithSubject) read the subject's grants once; a new request reads
// them again, so a grant revoked between requests applies to the next one;
// a grant change made through the layer applies to the same request's next
// check, and one rolled back with its transaction does not linger.
func TestAccessIsReadOncePerRequest(t *testing.T) {
	admin, agent, subject, inner, w, decide := memoFixture(t)
	allowed := func(ctx context.Context) bool {
		t.Helper()
		return decide(ctx).Allowed
	}

	req1 := WithSubject(context.Background(), subject)
	for range 5 {
		if !allowed(req1) {
			t.Fatal("request 1: read denied")
		}
	}
	if inner.reads != 1 {
		t.Fatalf("request 1: grants read %d times for 5 checks, want 1", inner.reads)
	}

	// Revoked between requests (not through this context): the next
	// request sees it.
	inner.grants = nil
	if allowed(WithSubject(context.Background(), subject)) {
		t.Fatal("request 2: read allowed after the grant was revoked")
	}
	if inner.reads != 2 {
		t.Fatalf("after request 2: %d reads, want 2", inner.reads)
	}

	// Changed through the layer within one request.
	inner.grants = []store.Grant{admin}
	req3 := WithSubject(context.Background(), subject)
	if !allowed(req3) {
		t.Fatal("request 3: read denied")
	}
	if err := w.DeleteAccessBinding(req3, "rb_admin"); err != nil {
		t.Fatal(err)
	}
	if allowed(req3) {
		t.Fatal("request 3: read allowed after its own request deleted the binding")
	}

	// A binding created inside a transaction that rolls back.
	inner.grants = []store.Grant{admin}
	req4 := WithSubject(context.Background(), subject)
	inner.failTx = true
	err := w.InTx(req4, func(tx store.Store) error {
		if err := tx.DeleteAccessBinding(req4, "rb_admin"); err != nil {
			return err
		}
		if err := tx.CreateAccessBinding(req4, store.AccessBinding{ID: "rb_new"}); err != nil {
			return err
		}
		// Read inside the transaction: memoizes the uncommitted state.
		d, err := tx.(*Store).Decide(req4, store.ActionRead, agent)
		if err != nil {
			return err
		}
		if !d.Allowed || !cmp.Equal(d.BindingIDs, []string{"rb_new"}) {
			t.Errorf("inside the transaction: %+v, want allowed by rb_new", d)
		}
		return nil
	})
	if err == nil {
		t.Fatal("the transaction did not fail")
	}
	d, err := w.Decide(req4, store.ActionRead, agent)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rb_admin"}, d.BindingIDs); diff != "" {
		t.Fatalf("after the rollback, deciding bindings (-want +got):\n%s", diff)
	}
}

// TestAccessReadWithTheSession: a request whose subject came with its
// access (WithSubjectAccess, from the session's one read) decides from it
// without reading the store; a grant change through the layer forgets it
// like a memoized read, and the next check reads the store.
func TestAccessReadWithTheSession(t *testing.T) {
	admin, _, subject, inner, w, decide := memoFixture(t)

	req := WithSubjectAccess(context.Background(), subject, store.Access{Grants: []store.Grant{admin}})
	for range 3 {
		if d := decide(req); !d.Allowed || !cmp.Equal(d.BindingIDs, []string{"rb_admin"}) {
			t.Fatalf("with the session's access: %+v, want allowed by rb_admin", d)
		}
	}
	if inner.reads != 0 {
		t.Fatalf("grants read %d times, want 0: they came with the session", inner.reads)
	}

	// What came with the session decides, not the store: an empty access
	// denies although the store holds a grant.
	if decide(WithSubjectAccess(context.Background(), subject, store.Access{})).Allowed {
		t.Fatal("allowed by a grant the session's read did not return")
	}

	if err := w.DeleteAccessBinding(req, "rb_admin"); err != nil {
		t.Fatal(err)
	}
	if decide(req).Allowed {
		t.Fatal("allowed after its own request deleted the binding")
	}
	if inner.reads != 1 {
		t.Fatalf("after the delete: %d reads, want 1", inner.reads)
	}
}

package authz

import (
	"context"
	"reflect"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// panicStore is an inner store whose every method panics: embedding the nil
// interface means any call that reaches it dereferences nil.
type panicStore struct{ store.Store }

// exempt lists the Store methods that do not themselves read or write data.
var exempt = map[string]bool{"InTx": true, "Close": true}

// TestEveryMethodRefusesAnonymous calls every Store method through the
// wrapper with no subject and zero arguments. Each must answer
// Unauthenticated without touching the inner store, so a method added to
// store.Store without a check here fails this test (by panicking into the
// nil inner store or by returning no error).
func TestEveryMethodRefusesAnonymous(t *testing.T) {
	w := Wrap(panicStore{}, nil)
	wt := reflect.TypeOf((*store.Store)(nil)).Elem()
	wv := reflect.ValueOf(w)
	for i := range wt.NumMethod() {
		m := wt.Method(i)
		if exempt[m.Name] {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s reached the inner store for an anonymous caller: %v", m.Name, p)
				}
			}()
			fn := wv.MethodByName(m.Name)
			args := []reflect.Value{reflect.ValueOf(context.Background())}
			for j := 1; j < fn.Type().NumIn(); j++ {
				args = append(args, reflect.Zero(fn.Type().In(j)))
			}
			out := fn.Call(args)
			errv := out[len(out)-1]
			if errv.IsNil() {
				t.Fatalf("%s returned no error for an anonymous caller", m.Name)
			}
			if k := errkind.KindOf(errv.Interface().(error)); k != errkind.Unauthenticated {
				t.Fatalf("%s: kind = %v, want Unauthenticated", m.Name, k)
			}
		})
	}
}

// TestSystemSubjectsAreLimited checks that a system subject is refused any
// method outside its list, again without reaching the inner store.
func TestSystemSubjectsAreLimited(t *testing.T) {
	w := Wrap(panicStore{}, nil)
	ctx := WithSubject(context.Background(), SystemSubject(SystemAudit))
	if _, err := w.GetNamespace(ctx, "ns_x"); !errkind.Is(err, errkind.PermissionDenied) {
		t.Fatalf("audit subject GetNamespace: err = %v, want PermissionDenied", err)
	}
	if _, err := w.ListAuditEvents(ctx, store.AuditFilter{}, nil, 1); err == nil {
		t.Fatal("audit subject ListAuditEvents: want an error")
	}
	for name, methods := range systemMethods {
		for m := range methods {
			if _, ok := reflect.TypeOf((*store.Store)(nil)).Elem().MethodByName(m); !ok {
				t.Errorf("system subject %s lists unknown method %s", name, m)
			}
		}
	}
}

// TestGetInstallationNeedsRead: a caller without installation read is
// refused before the inner store is read.
func TestGetInstallationNeedsRead(t *testing.T) {
	w := Wrap(panicStore{}, nil)
	ctx := WithSubjectAccess(context.Background(), &Subject{ID: "usr_1", Kind: KindUser, Credential: "session"}, store.Access{})
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("GetInstallation reached the inner store for a caller without installation read: %v", p)
		}
	}()
	if _, err := w.GetInstallation(ctx); !errkind.Is(err, errkind.PermissionDenied) {
		t.Fatalf("GetInstallation without a grant: err = %v, want PermissionDenied", err)
	}
}

// TestGetAgentForRefusesNonAgentActions: GetAgentFor serves operations on
// an existing Agent, so an action that is not one (create, or an action
// Agents do not have) is a programming error, refused before any data is
// read.
func TestGetAgentForRefusesNonAgentActions(t *testing.T) {
	w := Wrap(panicStore{}, nil)
	ctx := WithSubject(context.Background(), &Subject{ID: "usr_1", Kind: KindUser, Credential: "session"})
	for _, a := range []store.Action{store.ActionCreate, "", "fly"} {
		if _, err := w.GetAgentFor(ctx, a, "ns_1", "agt_1"); !errkind.Is(err, errkind.Internal) {
			t.Errorf("GetAgentFor(%q): err = %v, want Internal", a, err)
		}
	}
}

package authn

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// fakeStore implements SessionStore and AuthenticatorStore in memory. It
// records which subject each call ran under, and fails every call with err
// when err is set.
type fakeStore struct {
	mu       sync.Mutex
	users    map[string]store.User // by id
	sessions map[string]store.Session
	keys     map[string]store.APIKey
	sps      map[string]store.ServicePrincipal
	access   map[string]store.Access // by subject id
	err      error
	calls    []string // "Method subjectID"
}

var (
	_ SessionStore       = (*fakeStore)(nil)
	_ AuthenticatorStore = (*fakeStore)(nil)
	_ SessionStore       = store.Store(nil)
	_ AuthenticatorStore = store.Store(nil)
)

func newFakeStore() *fakeStore {
	return &fakeStore{
		users:    map[string]store.User{},
		sessions: map[string]store.Session{},
		keys:     map[string]store.APIKey{},
		sps:      map[string]store.ServicePrincipal{},
		access:   map[string]store.Access{},
	}
}

func (f *fakeStore) record(ctx context.Context, method string) error {
	subject := "anonymous"
	if s := authz.SubjectFrom(ctx); s != nil {
		subject = s.ID
	}
	f.calls = append(f.calls, method+" "+subject)
	return f.err
}

func notFound() error { return errkind.New(errkind.NotFound, "not found") }

func (f *fakeStore) GetUser(ctx context.Context, id string) (store.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "GetUser"); err != nil {
		return store.User{}, err
	}
	u, ok := f.users[id]
	if !ok {
		return store.User{}, notFound()
	}
	return u, nil
}

func (f *fakeStore) GetUserByEmail(ctx context.Context, email string) (store.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "GetUserByEmail"); err != nil {
		return store.User{}, err
	}
	for _, u := range f.users {
		if strings.EqualFold(u.Email, email) {
			return u, nil
		}
	}
	return store.User{}, notFound()
}

func (f *fakeStore) CreateSession(ctx context.Context, s store.Session) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "CreateSession"); err != nil {
		return err
	}
	f.sessions[string(s.TokenHash)] = s
	return nil
}

// GetSessionAccess returns the session and its user's grants from access
// (none when the user has no entry); as the store, a session whose user is
// gone is not found.
func (f *fakeStore) GetSessionAccess(ctx context.Context, tokenHash []byte) (store.Session, store.Access, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "GetSessionAccess"); err != nil {
		return store.Session{}, store.Access{}, err
	}
	s, ok := f.sessions[string(tokenHash)]
	if !ok {
		return store.Session{}, store.Access{}, notFound()
	}
	if _, ok := f.users[s.UserID]; !ok {
		return store.Session{}, store.Access{}, notFound()
	}
	return s, f.accessOf(s.UserID), nil
}

func (f *fakeStore) DeleteSession(ctx context.Context, tokenHash []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "DeleteSession"); err != nil {
		return err
	}
	if _, ok := f.sessions[string(tokenHash)]; !ok {
		return notFound()
	}
	delete(f.sessions, string(tokenHash))
	return nil
}

// GetAPIKeyAccess returns the key, its principal and the principal's
// grants from access; as the store, a key whose principal is gone is not
// found.
func (f *fakeStore) GetAPIKeyAccess(ctx context.Context, id string) (store.APIKey, store.ServicePrincipal, store.Access, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "GetAPIKeyAccess"); err != nil {
		return store.APIKey{}, store.ServicePrincipal{}, store.Access{}, err
	}
	k, ok := f.keys[id]
	if !ok {
		return store.APIKey{}, store.ServicePrincipal{}, store.Access{}, notFound()
	}
	sp, ok := f.sps[k.ServicePrincipalID]
	if !ok {
		return store.APIKey{}, store.ServicePrincipal{}, store.Access{}, notFound()
	}
	return k, sp, f.accessOf(sp.ID), nil
}

// accessOf is the subject's entry in access, or none.
func (f *fakeStore) accessOf(subjectID string) store.Access {
	if acc, ok := f.access[subjectID]; ok {
		return acc
	}
	return store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}
}

// subjects returns the distinct subjects the recorded calls ran under.
func (f *fakeStore) subjects() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, c := range f.calls {
		_, s, _ := strings.Cut(c, " ")
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeStore) TouchSession(ctx context.Context, tokenHash []byte, at, notAfter time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "TouchSession"); err != nil {
		return false, err
	}
	se, ok := f.sessions[string(tokenHash)]
	if !ok || !se.LastUsedAt.Before(notAfter) {
		return false, nil
	}
	se.LastUsedAt = at
	f.sessions[string(tokenHash)] = se
	return true, nil
}

func (f *fakeStore) TouchAPIKey(ctx context.Context, id string, at, notAfter time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(ctx, "TouchAPIKey"); err != nil {
		return false, err
	}
	k, ok := f.keys[id]
	if !ok || (k.LastUsedAt != nil && !k.LastUsedAt.Before(notAfter)) {
		return false, nil
	}
	k.LastUsedAt = &at
	f.keys[id] = k
	return true, nil
}

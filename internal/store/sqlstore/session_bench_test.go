package sqlstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// BenchmarkSessionLookup measures what authenticating a signed-in request
// reads before its operation: the session and its user's grants and
// restrictions, as one statement (GetSessionAccess, what the
// authenticator runs) against the two it replaced (GetSession, then
// ListAccess), on SQLite and, when OCC_TEST_POSTGRES_URL is set, on
// PostgreSQL. The user holds three bindings and one restriction. With
// -count N the two sides alternate:
//
//	go test ./internal/store/sqlstore -run '^$' -bench SessionLookup -count 5
func BenchmarkSessionLookup(b *testing.B) {
	engines := []struct {
		name string
		open func(testing.TB) *sqlstore.Store
	}{{"sqlite", testdb.SQLite}}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines = append(engines, struct {
			name string
			open func(testing.TB) *sqlstore.Store
		}{"postgres", testdb.Postgres})
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			ctx := context.Background()
			hash := seedSessionWithAccess(b, ctx, s)
			twoReads := func() error {
				se, err := s.GetSession(ctx, hash)
				if err != nil {
					return err
				}
				_, err = s.ListAccess(ctx, se.UserID)
				return err
			}
			oneRead := func() error {
				_, _, err := s.GetSessionAccess(ctx, hash)
				return err
			}
			for _, side := range []struct {
				name string
				fn   func() error
			}{{"two-reads", twoReads}, {"one-read", oneRead}} {
				b.Run(side.name, func(b *testing.B) {
					for b.Loop() {
						if err := side.fn(); err != nil {
							b.Fatal(err)
						}
					}
				})
				// 16 at once (SetParallelism 8 on 2 cores), as the API
				// benchmark's clients: ns/op is the inverse of the
				// throughput, which counts the database server's CPU too.
				b.Run(side.name+"-parallel", func(b *testing.B) {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := side.fn(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		})
	}
}

// seedSessionWithAccess creates a user with three bindings of one role and
// one restriction, and a session of it; it returns the session's token hash.
func seedSessionWithAccess(b *testing.B, ctx context.Context, s *sqlstore.Store) []byte {
	b.Helper()
	now := time.Now().UTC()
	u := store.User{ID: ids.New(ids.User), Email: "bench@example.com", PasswordHash: "x", CreatedAt: now}
	role := store.Role{ID: ids.New(ids.Role), Name: "bench", CreatedAt: now, Permissions: []store.Permission{
		{Action: store.ActionRead, ResourceKind: store.KindAgent},
		{Action: store.ActionUpdate, ResourceKind: store.KindAgent},
	}}
	se := store.Session{ID: ids.New(ids.Session), TokenHash: make([]byte, 32), UserID: u.ID, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	se.TokenHash[0] = 7
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	must(s.CreateUser(ctx, u))
	must(s.CreateRole(ctx, role))
	for i := range 3 {
		must(s.CreateAccessBinding(ctx, store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: u.ID, RoleID: role.ID,
			CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}))
	}
	must(s.CreateRestriction(ctx, store.Restriction{ID: ids.New(ids.Restriction), SubjectID: u.ID, Action: store.ActionDelete,
		ResourceKind: store.KindAgent, CreatedAt: now}))
	must(s.CreateSession(ctx, se))
	return se.TokenHash
}

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

// BenchmarkCredentialLookup measures what authenticating a request reads
// before its operation, as one statement (what the authenticator runs)
// against the reads it replaced: for a session, GetSessionAccess against
// GetSession then ListAccess; for an API key, GetAPIKeyAccess against
// GetAPIKey, GetServicePrincipal then ListAccess. On SQLite and, when
// OCC_TEST_POSTGRES_URL is set, on PostgreSQL; the user and the principal
// each hold three bindings and one restriction. Each side runs one at a
// time and then 16 at once; with -count N the sides alternate:
//
//	go test ./internal/store/sqlstore -run '^$' -bench CredentialLookup -count 3
func BenchmarkCredentialLookup(b *testing.B) {
	open := map[string]func(testing.TB) *sqlstore.Store{"sqlite": testdb.SQLite, "postgres": testdb.Postgres}
	engines := []string{"sqlite"}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines = append(engines, "postgres")
	}
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			s := open[engine](b)
			ctx := context.Background()
			hash, keyID := seedCredentialsWithAccess(b, ctx, s)
			sessionReads := func() error {
				se, err := s.GetSession(ctx, hash)
				if err != nil {
					return err
				}
				_, err = s.ListAccess(ctx, se.UserID)
				return err
			}
			sessionRead := func() error {
				_, _, err := s.GetSessionAccess(ctx, hash)
				return err
			}
			keyReads := func() error {
				k, err := s.GetAPIKey(ctx, keyID)
				if err != nil {
					return err
				}
				sp, err := s.GetServicePrincipal(ctx, k.ServicePrincipalID)
				if err != nil {
					return err
				}
				_, err = s.ListAccess(ctx, sp.ID)
				return err
			}
			keyRead := func() error {
				_, _, _, err := s.GetAPIKeyAccess(ctx, keyID)
				return err
			}
			for _, side := range []struct {
				name string
				fn   func() error
			}{
				{"session/two-reads", sessionReads}, {"session/one-read", sessionRead},
				{"key/three-reads", keyReads}, {"key/one-read", keyRead},
			} {
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

// seedCredentialsWithAccess creates a user and a service principal, each
// with three bindings of one role and one restriction, a session of the
// user and a key of the principal; it returns the session's token hash and
// the key's id.
func seedCredentialsWithAccess(b *testing.B, ctx context.Context, s *sqlstore.Store) ([]byte, string) {
	b.Helper()
	now := time.Now().UTC()
	u := store.User{ID: ids.New(ids.User), Email: "bench@example.com", PasswordHash: "x", CreatedAt: now}
	sp := store.ServicePrincipal{ID: ids.New(ids.ServicePrincipal), Name: "bench", CreatedAt: now}
	role := store.Role{ID: ids.New(ids.Role), Name: "bench", CreatedAt: now, Permissions: []store.Permission{
		{Action: store.ActionRead, ResourceKind: store.KindAgent},
		{Action: store.ActionUpdate, ResourceKind: store.KindAgent},
	}}
	se := store.Session{ID: ids.New(ids.Session), TokenHash: make([]byte, 32), UserID: u.ID, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	se.TokenHash[0] = 7
	key := store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: "bench", SecretHash: make([]byte, 32),
		CreatedBy: u.ID, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	must(s.CreateUser(ctx, u))
	must(s.CreateServicePrincipal(ctx, sp))
	must(s.CreateRole(ctx, role))
	for _, subject := range []string{u.ID, sp.ID} {
		for i := range 3 {
			must(s.CreateAccessBinding(ctx, store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: subject, RoleID: role.ID,
				CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}))
		}
		must(s.CreateRestriction(ctx, store.Restriction{ID: ids.New(ids.Restriction), SubjectID: subject, Action: store.ActionDelete,
			ResourceKind: store.KindAgent, CreatedAt: now}))
	}
	must(s.CreateSession(ctx, se))
	must(s.CreateAPIKey(ctx, key))
	return se.TokenHash, key.ID
}

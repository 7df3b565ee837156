package occ

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Audit actions for identities and credentials.
const (
	ActionUserCreate             = "openclaw.iam.users.create"
	ActionServicePrincipalCreate = "openclaw.iam.service_principals.create"
	ActionServicePrincipalDelete = "openclaw.iam.service_principals.delete"
	ActionServiceKeyCreate       = "openclaw.auth.service_keys.create"
	ActionServiceKeyRevoke       = "openclaw.auth.service_keys.revoke"
)

// CreateUser adds a human user who signs in with email and password.
//
// The caller's permission is checked before anything else: hashing takes
// a shared slot and 64 MiB for about 100 ms, which a caller who may not
// create users must not be able to spend (nor learn the password policy
// from the answer). The transaction checks it again, with the write.
func (s *Service) CreateUser(ctx context.Context, email, password string) (store.User, error) {
	az, err := authorizerOf(s.store)
	if err != nil {
		return store.User{}, err
	}
	if err := az.MayCreateUser(ctx); err != nil {
		return store.User{}, err
	}
	email = strings.TrimSpace(email)
	if err := validateEmail(email); err != nil {
		return store.User{}, err
	}
	hash, err := authn.HashPassword(ctx, password)
	if err != nil {
		return store.User{}, err
	}
	u := store.User{ID: ids.New(ids.User), Email: email, PasswordHash: hash, CreatedAt: s.clock()}
	err = s.store.InTx(ctx, func(tx store.Store) error {
		if err := tx.CreateUser(ctx, u); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionUserCreate, store.AuditResource{Kind: store.KindUser, ID: u.ID}, map[string]string{"email": email})
	})
	return u, err
}

// maxEmailLen is the longest email address (RFC 5321's path limit less
// its angle brackets), in bytes.
const maxEmailLen = 254

func validateEmail(email string) error {
	at := strings.LastIndexByte(email, '@')
	if email == "" {
		return errkind.InvalidDetails("The email is required.", errkind.Detail{Path: "/email", Code: errkind.DetailRequired})
	}
	if len(email) > maxEmailLen {
		return errkind.InvalidDetails("The email must be at most 254 bytes.", errkind.Detail{Path: "/email", Code: errkind.DetailTooLong})
	}
	if at <= 0 || at == len(email)-1 || strings.ContainsFunc(email, isSpaceOrControl) {
		return errkind.InvalidDetails("The email is not a valid address.", errkind.Detail{Path: "/email", Code: errkind.DetailInvalidFormat})
	}
	return nil
}

// isSpaceOrControl reports the characters no email and no key name may
// hold. A NUL would also be refused by PostgreSQL (not by SQLite), and
// only with a message naming no field.
func isSpaceOrControl(r rune) bool { return r == ' ' || unicode.IsControl(r) }

// CreateServicePrincipal adds a non-human identity, optionally limited to
// one Namespace.
func (s *Service) CreateServicePrincipal(ctx context.Context, name, namespaceID string) (store.ServicePrincipal, error) {
	if err := validateName("/name", name); err != nil {
		return store.ServicePrincipal{}, err
	}
	sp := store.ServicePrincipal{ID: ids.New(ids.ServicePrincipal), Name: name, NamespaceID: namespaceID, CreatedAt: s.clock()}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if namespaceID != "" {
			if _, err := tx.GetNamespace(ctx, namespaceID); err != nil {
				return invalidRef("/namespaceId", err)
			}
		}
		if err := tx.CreateServicePrincipal(ctx, sp); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionServicePrincipalCreate,
			store.AuditResource{Kind: store.KindServiceAccount, ID: sp.ID, NamespaceID: namespaceID}, map[string]string{"name": name})
	})
	return sp, err
}

func (s *Service) GetServicePrincipal(ctx context.Context, id string) (store.ServicePrincipal, error) {
	return s.store.GetServicePrincipal(ctx, id)
}

func (s *Service) ListServicePrincipals(ctx context.Context, q PageQuery) (Page[store.ServicePrincipal], error) {
	return paged(q, func(p store.PageRequest) (store.Page[store.ServicePrincipal], error) {
		return s.store.ListServicePrincipals(ctx, p)
	})
}

// DeleteServicePrincipal removes a principal with its keys, bindings and
// restrictions.
func (s *Service) DeleteServicePrincipal(ctx context.Context, id string) error {
	return s.store.InTx(ctx, func(tx store.Store) error {
		sp, err := tx.GetServicePrincipal(ctx, id)
		if err != nil {
			return err
		}
		if sp.AgentID != "" {
			return errkind.New(errkind.Conflict, "An Agent's service principal is removed with its Agent.")
		}
		if err := tx.DeleteServicePrincipal(ctx, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionServicePrincipalDelete,
			store.AuditResource{Kind: store.KindServiceAccount, ID: id, NamespaceID: sp.NamespaceID}, map[string]string{"name": sp.Name})
	})
}

// ServiceKeyInput is a request for a new service API key.
type ServiceKeyInput struct {
	ServicePrincipalID string
	NamespaceID        string
	Name               string
	ExpiresIn          *int64 // seconds; nil means the default
}

// maxKeyNameLen is the longest service key name, in UTF-16 code units.
const maxKeyNameLen = 32

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// IssuedKey is a new key; Key is shown once (as apitypes.ServiceKey) and
// never stored.
type IssuedKey struct {
	store.APIKey
	Key string
}

// IssueServiceKey creates an API key for an existing non-Agent service
// principal. The issuer needs installation administer (enforced by the
// store) and must already hold every grant of the target principal: a key
// can never carry more than its issuer could do. A principal limited to a
// Namespace only gets keys for that Namespace.
//
// Fail-closed: if the audit record cannot be written the key is not
// created (the transaction rolls back), because an unaudited credential is
// worse than a failed request.
func (s *Service) IssueServiceKey(ctx context.Context, in ServiceKeyInput) (IssuedKey, error) {
	// Characters as the reference counts them (a JavaScript string's
	// length, UTF-16 code units), not bytes: 32 accented letters fit, 17
	// emoji (34 units) do not.
	if n := utf16Len(in.Name); n < 1 || n > maxKeyNameLen {
		code := errkind.DetailTooLong
		if n == 0 {
			code = errkind.DetailRequired
		}
		return IssuedKey{}, errkind.InvalidDetails("The key name must be 1 to 32 characters.", errkind.Detail{Path: "/name", Code: code})
	}
	if strings.ContainsFunc(in.Name, unicode.IsControl) {
		return IssuedKey{}, errkind.InvalidDetails("The key name must not contain control characters.", errkind.Detail{Path: "/name", Code: errkind.DetailInvalidValue})
	}
	ttl, err := authn.ValidateExpiresIn(in.ExpiresIn)
	if err != nil {
		return IssuedKey{}, err
	}
	id, presented, hash := authn.NewAPIKey()
	now := s.clock()
	k := store.APIKey{ID: id, ServicePrincipalID: in.ServicePrincipalID, NamespaceID: in.NamespaceID, Name: in.Name,
		SecretHash: hash, ExpiresAt: now.Add(ttl), CreatedAt: now}
	if sub := authz.SubjectFrom(ctx); sub != nil {
		k.CreatedBy = sub.ID
	}
	err = s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		sp, err := tx.GetServicePrincipal(ctx, in.ServicePrincipalID)
		if err != nil {
			return invalidRef("/servicePrincipalId", err)
		}
		if sp.AgentID != "" {
			return errkind.InvalidDetails("Agent-owned principals cannot have API keys.", errkind.Detail{Path: "/servicePrincipalId", Code: errkind.DetailInvalidValue})
		}
		if sp.NamespaceID != "" {
			if k.NamespaceID == "" {
				k.NamespaceID = sp.NamespaceID
			} else if k.NamespaceID != sp.NamespaceID {
				return errkind.InvalidDetails("The principal is limited to another Namespace.", errkind.Detail{Path: "/namespaceId", Code: errkind.DetailInvalidValue})
			}
		}
		if k.NamespaceID != "" {
			if _, err := tx.GetNamespace(ctx, k.NamespaceID); err != nil {
				return invalidRef("/namespaceId", err)
			}
		}
		if err := s.issuerCovers(ctx, tx, sp.ID); err != nil {
			return err
		}
		if err := tx.CreateAPIKey(ctx, k); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionServiceKeyCreate, store.AuditResource{Kind: store.KindAPIKey, ID: k.ID, NamespaceID: k.NamespaceID},
			map[string]string{"servicePrincipalId": sp.ID, "name": k.Name, "expiresAt": k.ExpiresAt.Format(time.RFC3339)})
	})
	if err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{APIKey: k, Key: presented}, nil
}

// issuerCovers refuses a key whose principal holds a grant the issuer does
// not: the issuer must hold every grant of the principal whole, as the
// authorizing store decides (HoldsGrant: allowed on the grant's scope and
// restricted nowhere inside it).
func (s *Service) issuerCovers(ctx context.Context, tx store.Store, principalID string) error {
	// Decide on the transaction's own store: a second connection could
	// not be had while this transaction holds SQLite's only writer.
	az, err := authorizerOf(tx)
	if err != nil {
		return err
	}
	grants, err := tx.ListGrants(ctx, principalID)
	if err != nil {
		return err
	}
	for _, g := range grants {
		ok, err := az.HoldsGrant(ctx, g)
		if err != nil {
			return err
		}
		if !ok {
			return errkind.New(errkind.PermissionDenied, "You cannot issue a key for a principal that holds grants you do not hold.")
		}
	}
	return nil
}

// RevokeServiceKey revokes a key; revoking twice succeeds.
func (s *Service) RevokeServiceKey(ctx context.Context, id string) (store.APIKey, error) {
	var k store.APIKey
	err := s.store.InTx(ctx, func(tx store.Store) error {
		var err error
		if k, err = tx.GetAPIKey(ctx, id); err != nil {
			return err
		}
		if err := tx.RevokeAPIKey(ctx, id, s.clock()); err != nil {
			return err
		}
		if k, err = tx.GetAPIKey(ctx, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionServiceKeyRevoke, store.AuditResource{Kind: store.KindAPIKey, ID: id, NamespaceID: k.NamespaceID},
			map[string]string{"servicePrincipalId": k.ServicePrincipalID})
	})
	return k, err
}

// CurrentUser returns the signed-in user.
func (s *Service) CurrentUser(ctx context.Context) (store.User, error) {
	sub := authz.SubjectFrom(ctx)
	if sub == nil || sub.Kind != authz.KindUser {
		return store.User{}, errkind.New(errkind.Unauthenticated, "Authentication is required.")
	}
	return s.store.GetUser(ctx, sub.ID)
}

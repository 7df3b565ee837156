package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: the installation singleton, users, sessions, service principals
// and API keys.

// ---- installation ----

func (s *Store) GetInstallation(ctx context.Context) (store.Installation, error) {
	var in store.Installation
	err := s.queryRow(ctx, `SELECT id, name, created_at FROM installation`).
		Scan(&in.ID, &in.Name, timeCol{&in.CreatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Installation{}, notFound("installation")
	}
	if err != nil {
		return store.Installation{}, s.dbErr("get installation", err)
	}
	return in, nil
}

// CreateInstallation relies on the singleton column's unique key, so two
// concurrent bootstraps cannot both succeed.
func (s *Store) CreateInstallation(ctx context.Context, in store.Installation) error {
	_, err := s.exec(ctx, `INSERT INTO installation (id, name, created_at) VALUES (?, ?, ?)`,
		in.ID, in.Name, s.t(in.CreatedAt))
	if err != nil && s.d.classify(err) == failUnique {
		return conflict(errkind.CodeInstallationExists, "the installation already exists", err)
	}
	return s.dbErr("create installation", err)
}

// ---- users ----

const userColumns = `id, email, password_hash, created_at`

func scanUser(r rowScanner) (store.User, error) {
	var u store.User
	err := r.Scan(&u.ID, &u.Email, &u.PasswordHash, timeCol{&u.CreatedAt})
	return u, err
}

// emailKey is the form emails are compared in. Go computes it, not SQL, so
// both engines agree on non-ASCII addresses.
func emailKey(email string) string { return strings.ToLower(email) }

func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	_, err := s.exec(ctx, `INSERT INTO users (id, email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.Email, emailKey(u.Email), u.PasswordHash, s.t(u.CreatedAt))
	if err != nil && s.d.classify(err) == failUnique {
		return conflict("", "a user with this email or id already exists", err)
	}
	return s.dbErr("create user", err)
}

func (s *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	u, err := scanUser(s.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	return u, s.getErr("get user", "user", err)
}

func (s *Store) GetUserByEmail(ctx context.Context, email string) (store.User, error) {
	u, err := scanUser(s.queryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email_key = ?`, emailKey(email)))
	return u, s.getErr("get user", "user", err)
}

// ---- sessions ----

const sessionColumns = `id, token_hash, user_id, expires_at, created_at, last_used_at`

func scanSession(r rowScanner) (store.Session, error) {
	var se store.Session
	err := r.Scan(&se.ID, &se.TokenHash, &se.UserID, timeCol{&se.ExpiresAt}, timeCol{&se.CreatedAt}, timeCol{&se.LastUsedAt})
	return se, err
}

// CreateSession stores a session; a zero LastUsedAt is its creation time.
func (s *Store) CreateSession(ctx context.Context, se store.Session) error {
	if se.LastUsedAt.IsZero() {
		se.LastUsedAt = se.CreatedAt
	}
	_, err := s.exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		se.ID, se.TokenHash, se.UserID, s.t(se.ExpiresAt), s.t(se.CreatedAt), s.t(se.LastUsedAt))
	return s.dbErr("create session", err)
}

// GetSession returns the session even when it has expired: judging expiry
// is the caller's (it owns the clock).
func (s *Store) GetSession(ctx context.Context, tokenHash []byte) (store.Session, error) {
	// The user is checked in the same query (the foreign key already
	// deletes a user's sessions with it; this keeps a session without its
	// user unusable even so), so authenticating a request is one read.
	se, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE token_hash = ? AND EXISTS (SELECT 1 FROM users WHERE users.id = sessions.user_id)`, tokenHash))
	return se, s.getErr("get session", "session", err)
}

// DeleteSession deletes one session; an unknown token is NotFound, which a
// sign-out may treat as already done.
func (s *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	return s.execOne(ctx, "delete session", "session", `DELETE FROM sessions WHERE token_hash = ?`, tokenHash)
}

// ListUserSessions returns the user's sessions, newest first.
func (s *Store) ListUserSessions(ctx context.Context, userID string) ([]store.Session, error) {
	return list(ctx, s, "list sessions", scanSession,
		`SELECT `+sessionColumns+` FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC`, userID)
}

// DeleteUserSession deletes the user's session id; another user's session
// is NotFound like a missing one.
func (s *Store) DeleteUserSession(ctx context.Context, userID, id string) error {
	return s.execOne(ctx, "delete session", "session", `DELETE FROM sessions WHERE user_id = ? AND id = ?`, userID, id)
}

// TouchSession records a use; the WHERE clause makes concurrent touches
// within one interval write once.
func (s *Store) TouchSession(ctx context.Context, tokenHash []byte, at, notAfter time.Time) (bool, error) {
	return s.touch(ctx, "touch session",
		`UPDATE sessions SET last_used_at = ? WHERE token_hash = ? AND last_used_at < ?`, s.t(at), tokenHash, s.t(notAfter))
}

// TouchAPIKey records a key's use, at most once per interval.
func (s *Store) TouchAPIKey(ctx context.Context, id string, at, notAfter time.Time) (bool, error) {
	return s.touch(ctx, "touch API key",
		`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, s.t(at), id, s.t(notAfter))
}

func (s *Store) touch(ctx context.Context, op, query string, args ...any) (bool, error) {
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return false, s.dbErr(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.dbErr(op, err)
	}
	return n > 0, nil
}

// RevokeUserCredentials deletes the user's sessions and revokes the keys
// the user created, in one transaction.
func (s *Store) RevokeUserCredentials(ctx context.Context, userID string, at time.Time) (sessions, keys int64, err error) {
	err = s.inTx(ctx, func(tx *Store) error {
		ok, err := tx.exists(ctx, "revoke user credentials", `SELECT 1 FROM users WHERE id = ?`, userID)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("user")
		}
		res, err := tx.exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
		if err != nil {
			return tx.dbErr("revoke user sessions", err)
		}
		if sessions, err = res.RowsAffected(); err != nil {
			return tx.dbErr("revoke user sessions", err)
		}
		res, err = tx.exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE created_by = ? AND revoked_at IS NULL`, tx.t(at), userID)
		if err != nil {
			return tx.dbErr("revoke user keys", err)
		}
		if keys, err = res.RowsAffected(); err != nil {
			return tx.dbErr("revoke user keys", err)
		}
		return nil
	})
	return sessions, keys, err
}

// DeleteExpiredSessions deletes sessions whose expiry is at or before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, s.t(now))
	if err != nil {
		return 0, s.dbErr("delete expired sessions", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.dbErr("delete expired sessions", err)
	}
	return n, nil
}

// ---- service principals ----

const servicePrincipalColumns = `id, name, namespace_id, agent_id, created_at`

func scanServicePrincipal(r rowScanner) (store.ServicePrincipal, error) {
	var sp store.ServicePrincipal
	err := r.Scan(&sp.ID, &sp.Name, optStringCol{&sp.NamespaceID}, optStringCol{&sp.AgentID}, timeCol{&sp.CreatedAt})
	return sp, err
}

func (s *Store) CreateServicePrincipal(ctx context.Context, sp store.ServicePrincipal) error {
	_, err := s.exec(ctx, `INSERT INTO service_principals (`+servicePrincipalColumns+`) VALUES (?, ?, ?, ?, ?)`,
		sp.ID, sp.Name, nullString(sp.NamespaceID), nullString(sp.AgentID), s.t(sp.CreatedAt))
	return s.dbErr("create service principal", err)
}

func (s *Store) GetServicePrincipal(ctx context.Context, id string) (store.ServicePrincipal, error) {
	sp, err := scanServicePrincipal(s.queryRow(ctx, `SELECT `+servicePrincipalColumns+` FROM service_principals WHERE id = ?`, id))
	return sp, s.getErr("get service principal", "service principal", err)
}

// ListServicePrincipals returns every principal, oldest first.
func (s *Store) ListServicePrincipals(ctx context.Context, p store.PageRequest) (store.Page[store.ServicePrincipal], error) {
	return listPage(ctx, s, "list service principals", scanServicePrincipal,
		func(sp store.ServicePrincipal) store.PageCursor {
			return store.PageCursor{CreatedAt: sp.CreatedAt, ID: sp.ID}
		},
		`SELECT `+servicePrincipalColumns+` FROM service_principals`, "WHERE", p)
}

// DeleteServicePrincipal deletes the principal, its bindings and restrictions
// (explicitly: a subject id has no foreign key) and its API keys (by cascade),
// in one transaction.
func (s *Store) DeleteServicePrincipal(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *Store) error {
		ok, err := tx.exists(ctx, "delete service principal", `SELECT 1 FROM service_principals WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("service principal")
		}
		if _, err := tx.exec(ctx, `DELETE FROM iam_access_bindings WHERE subject_id = ?`, id); err != nil {
			return tx.dbErr("delete service principal bindings", err)
		}
		if _, err := tx.exec(ctx, `DELETE FROM iam_restrictions WHERE subject_id = ?`, id); err != nil {
			return tx.dbErr("delete service principal restrictions", err)
		}
		return tx.execOne(ctx, "delete service principal", "service principal", `DELETE FROM service_principals WHERE id = ?`, id)
	})
}

// ---- API keys ----

const apiKeyColumns = `id, service_principal_id, namespace_id, name, secret_hash, created_by, expires_at, revoked_at, created_at, last_used_at`

func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	_, err := s.exec(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.ServicePrincipalID, nullString(k.NamespaceID), k.Name, k.SecretHash, k.CreatedBy,
		s.t(k.ExpiresAt), s.optTimeArg(k.RevokedAt), s.t(k.CreatedAt), s.optTimeArg(k.LastUsedAt))
	return s.dbErr("create API key", err)
}

func (s *Store) GetAPIKey(ctx context.Context, id string) (store.APIKey, error) {
	var k store.APIKey
	err := s.queryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`, id).Scan(
		&k.ID, &k.ServicePrincipalID, optStringCol{&k.NamespaceID}, &k.Name, &k.SecretHash, &k.CreatedBy,
		timeCol{&k.ExpiresAt}, optTimeCol{&k.RevokedAt}, timeCol{&k.CreatedAt}, optTimeCol{&k.LastUsedAt})
	return k, s.getErr("get API key", "API key", err)
}

// RevokeAPIKey sets revoked_at once; COALESCE keeps the first revocation time
// when the key is revoked again.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return s.execOne(ctx, "revoke API key", "API key",
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, s.t(at), id)
}

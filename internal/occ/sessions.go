package occ

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Audit actions for sessions and credential revocation.
const (
	ActionSessionRevoke         = "openclaw.auth.sessions.revoke"
	ActionUserCredentialsRevoke = "openclaw.iam.users.revoke_credentials"
)

// currentUser is the signed-in user's id; service principals have no
// sessions.
func currentUser(ctx context.Context) (*authz.Subject, error) {
	sub := authz.SubjectFrom(ctx)
	if sub == nil || sub.Kind != authz.KindUser {
		return nil, errkind.New(errkind.Unauthenticated, "Only a signed-in user has sessions.")
	}
	return sub, nil
}

// MySessions lists the caller's sessions that are still alive: before
// their absolute end and before their idle end (idleEnd, the
// authenticator's rule), newest first.
func (s *Service) MySessions(ctx context.Context, idleEnd func(store.Session) time.Time) ([]store.Session, error) {
	sub, err := currentUser(ctx)
	if err != nil {
		return nil, err
	}
	all, err := s.store.ListUserSessions(ctx, sub.ID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	return slices.DeleteFunc(all, func(se store.Session) bool { return !now.Before(se.ExpiresAt) || !now.Before(idleEnd(se)) }), nil
}

// RevokeMySession ends one of the caller's sessions (possibly the current
// one). Another user's session is NotFound like a missing one.
func (s *Service) RevokeMySession(ctx context.Context, id string) error {
	sub, err := currentUser(ctx)
	if err != nil {
		return err
	}
	return s.store.InTx(ctx, func(tx store.Store) error {
		if err := tx.DeleteUserSession(ctx, sub.ID, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionSessionRevoke, store.AuditResource{Kind: store.KindUser, ID: sub.ID},
			map[string]string{"sessionId": id})
	})
}

// RevokeUserCredentials ends every session of the user and revokes every
// service key the user issued, at once. It is fail-closed: the audit
// record commits in the same transaction or nothing is revoked.
func (s *Service) RevokeUserCredentials(ctx context.Context, userID string) (sessions, keys int64, err error) {
	err = s.store.InTx(ctx, func(tx store.Store) error {
		var err error
		if sessions, keys, err = tx.RevokeUserCredentials(ctx, userID, s.clock()); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionUserCredentialsRevoke, store.AuditResource{Kind: store.KindUser, ID: userID},
			map[string]string{"sessionsRevoked": strconv.FormatInt(sessions, 10), "keysRevoked": strconv.FormatInt(keys, 10)})
	})
	return sessions, keys, err
}

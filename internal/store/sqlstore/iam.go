package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/store"
)

// This file: roles, access bindings, restrictions and the grant queries the
// authorizer runs on every request.

// ---- roles ----

const roleColumns = `id, namespace_id, name, permissions, builtin, created_at`

func scanRole(r rowScanner) (store.Role, error) {
	var ro store.Role
	err := r.Scan(&ro.ID, optStringCol{&ro.NamespaceID}, &ro.Name, permissionsCol{&ro.Permissions}, &ro.Builtin, timeCol{&ro.CreatedAt})
	if ro.Permissions == nil {
		ro.Permissions = []store.Permission{}
	}
	return ro, err
}

func (s *Store) CreateRole(ctx context.Context, r store.Role) error {
	perms := r.Permissions
	if perms == nil {
		perms = []store.Permission{} // stored as [], never null
	}
	permsJSON, err := jsonArg(perms)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO iam_roles (`+roleColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, nullString(r.NamespaceID), r.Name, permsJSON, r.Builtin, s.t(r.CreatedAt))
	return s.dbErr("create role", err)
}

func (s *Store) GetRole(ctx context.Context, id string) (store.Role, error) {
	ro, err := scanRole(s.queryRow(ctx, `SELECT `+roleColumns+` FROM iam_roles WHERE id = ?`, id))
	return ro, s.getErr("get role", "role", err)
}

// ListRoles returns every role, oldest first.
func (s *Store) ListRoles(ctx context.Context, p store.PageRequest) (store.Page[store.Role], error) {
	return listPage(ctx, s, "list roles", scanRole,
		func(r store.Role) store.PageCursor { return store.PageCursor{CreatedAt: r.CreatedAt, ID: r.ID} },
		`SELECT `+roleColumns+` FROM iam_roles`, "WHERE", p)
}

// DeleteRole refuses built-in roles and roles still bound. The binding check
// gives a clear error inside a caller's transaction; the RESTRICT foreign key
// is the backstop against a binding created concurrently.
func (s *Store) DeleteRole(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *Store) error {
		var builtin bool
		err := tx.queryRow(ctx, `SELECT builtin FROM iam_roles WHERE id = ?`, id).Scan(&builtin)
		if err != nil {
			return tx.getErr("delete role", "role", err)
		}
		if builtin {
			return conflict("", "built-in roles cannot be deleted", nil)
		}
		bound, err := tx.exists(ctx, "delete role", `SELECT 1 FROM iam_access_bindings WHERE role_id = ? LIMIT 1`, id)
		if err != nil {
			return err
		}
		if bound {
			return conflict("", "the role is used by an access binding", nil)
		}
		_, err = tx.exec(ctx, `DELETE FROM iam_roles WHERE id = ?`, id)
		if err != nil && tx.d.classify(err) == failForeignKey {
			return conflict("", "the role is used by an access binding", err)
		}
		return tx.dbErr("delete role", err)
	})
}

// ---- access bindings ----

const bindingColumns = `id, namespace_id, subject_id, role_id, resource_kind, resource_id, created_at`

func scanBinding(r rowScanner) (store.AccessBinding, error) {
	var b store.AccessBinding
	var kind string
	err := r.Scan(&b.ID, optStringCol{&b.NamespaceID}, &b.SubjectID, &b.RoleID,
		optStringCol{&kind}, optStringCol{&b.ResourceID}, timeCol{&b.CreatedAt})
	b.ResourceKind = store.ResourceKind(kind)
	return b, err
}

func (s *Store) CreateAccessBinding(ctx context.Context, b store.AccessBinding) error {
	_, err := s.exec(ctx, `INSERT INTO iam_access_bindings (`+bindingColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		b.ID, nullString(b.NamespaceID), b.SubjectID, b.RoleID,
		nullString(string(b.ResourceKind)), nullString(b.ResourceID), s.t(b.CreatedAt))
	return s.dbErr("create access binding", err)
}

func (s *Store) GetAccessBinding(ctx context.Context, id string) (store.AccessBinding, error) {
	b, err := scanBinding(s.queryRow(ctx, `SELECT `+bindingColumns+` FROM iam_access_bindings WHERE id = ?`, id))
	return b, s.getErr("get access binding", "access binding", err)
}

// ListAccessBindings returns every binding, oldest first.
func (s *Store) ListAccessBindings(ctx context.Context, p store.PageRequest) (store.Page[store.AccessBinding], error) {
	return listPage(ctx, s, "list access bindings", scanBinding,
		func(b store.AccessBinding) store.PageCursor {
			return store.PageCursor{CreatedAt: b.CreatedAt, ID: b.ID}
		},
		`SELECT `+bindingColumns+` FROM iam_access_bindings`, "WHERE", p)
}

func (s *Store) DeleteAccessBinding(ctx context.Context, id string) error {
	return s.execOne(ctx, "delete access binding", "access binding", `DELETE FROM iam_access_bindings WHERE id = ?`, id)
}

// ListGrants returns the subject's bindings with their roles' permissions,
// oldest first, in one query.
func (s *Store) ListGrants(ctx context.Context, subjectID string) ([]store.Grant, error) {
	return list(ctx, s, "list grants", func(r rowScanner) (store.Grant, error) {
		var g store.Grant
		var kind string
		err := r.Scan(&g.Binding.ID, optStringCol{&g.Binding.NamespaceID}, &g.Binding.SubjectID, &g.Binding.RoleID,
			optStringCol{&kind}, optStringCol{&g.Binding.ResourceID}, timeCol{&g.Binding.CreatedAt},
			permissionsCol{&g.Permissions})
		g.Binding.ResourceKind = store.ResourceKind(kind)
		if g.Permissions == nil {
			g.Permissions = []store.Permission{}
		}
		return g, err
	}, `SELECT b.id, b.namespace_id, b.subject_id, b.role_id, b.resource_kind, b.resource_id, b.created_at, r.permissions
		FROM iam_access_bindings b JOIN iam_roles r ON r.id = b.role_id
		WHERE b.subject_id = ?
		ORDER BY b.created_at, b.id`, subjectID)
}

// ListAccess reads the subject's grants and restrictions with one
// statement: the two row shapes share eight columns (a tag, then id,
// namespace, role or action, resource kind and id, creation time, and the
// role's permissions or the restriction's effect, as text on both engines),
// ordered by (created_at, id) as ListGrants and ListSubjectRestrictions are
// (each side reads its subject index in that order, so neither engine
// sorts), and are split by the tag.
func (s *Store) ListAccess(ctx context.Context, subjectID string) (store.Access, error) {
	rows, err := s.query(ctx, `SELECT 'g', b.id, b.namespace_id, b.role_id, b.resource_kind, b.resource_id, b.created_at, CAST(r.permissions AS TEXT)
		FROM iam_access_bindings b JOIN iam_roles r ON r.id = b.role_id
		WHERE b.subject_id = ?
		UNION ALL
		SELECT 'r', id, namespace_id, action, resource_kind, resource_id, created_at, effect
		FROM iam_restrictions WHERE subject_id = ?
		ORDER BY 7, 2`, subjectID, subjectID)
	if err != nil {
		return store.Access{}, s.dbErr("list access", err)
	}
	defer rows.Close()
	acc := store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}
	for rows.Next() {
		var r accessRow
		if err := rows.Scan(&r.tag, &r.id, optStringCol{&r.namespaceID}, &r.roleOrAction, optStringCol{&r.kind},
			optStringCol{&r.resourceID}, timeCol{&r.createdAt}, &r.last); err != nil {
			return store.Access{}, s.dbErr("list access", err)
		}
		if err := r.addTo(&acc, subjectID); err != nil {
			return store.Access{}, s.dbErr("list access", err)
		}
	}
	if err := rows.Err(); err != nil {
		return store.Access{}, s.dbErr("list access", err)
	}
	return acc, nil
}

// GetSessionAccess is GetSession and ListAccess of the session's user in
// one statement: the session row (tag 's', its user id where a grant has
// its role, its two other times in the last columns) and the user's grants
// and restrictions as ListAccess reads them, found from the session. No
// session (or no user) is no row at all, so NotFound; a session whose user
// has neither grants nor restrictions is its row alone.
//
// Every API request signed in with a session runs it, so on SQLite it is
// read as one packed value (packed.go), like the list pages: read column
// by column, its few rows of ten columns cost about a third more, in the
// driver's calls per column (BenchmarkCredentialLookup;
// docs/performance.md). The statement has no ORDER BY: the grants and
// restrictions are put in ListAccess's order, (created_at, id), here,
// which also spares SQLite a sorter.
//
// It reads through the read cache (readcache.go): a session revoked or
// expired, or a grant removed, is a committed write, after which no
// cached result is served.
func (s *Store) GetSessionAccess(ctx context.Context, tokenHash []byte) (store.Session, store.Access, error) {
	r, err := cachedRead(ctx, s, "get session access", cacheKey("session", string(tokenHash)),
		func(r sessionAccess) sessionAccess {
			return sessionAccess{session: r.session, access: cloneAccess(r.access)}
		},
		func() (sessionAccess, error) {
			se, acc, err := s.getSessionAccess(ctx, tokenHash)
			return sessionAccess{session: se, access: acc}, err
		})
	if err != nil {
		return store.Session{}, store.Access{}, err
	}
	r.session.TokenHash = tokenHash
	return r.session, r.access, nil
}

func (s *Store) getSessionAccess(ctx context.Context, tokenHash []byte) (store.Session, store.Access, error) {
	const op = "get session access"
	rs, err := listOrdered(ctx, s, op, scanSessionAccessRow,
		func(sessionAccessRow, sessionAccessRow) bool { return true }, 8,
		`WITH s AS (SELECT id, user_id, expires_at, created_at, last_used_at FROM sessions
			WHERE token_hash = ? AND EXISTS (SELECT 1 FROM users WHERE users.id = sessions.user_id))
		SELECT `+packed(`tag, id, namespace_id, role_or_action, resource_kind, resource_id, created_at, last, expires_at, last_used_at`)+` FROM (
		SELECT 's' AS tag, s.id AS id, NULL AS namespace_id, s.user_id AS role_or_action, NULL AS resource_kind, NULL AS resource_id,
			s.created_at AS created_at, NULL AS last, s.expires_at AS expires_at, s.last_used_at AS last_used_at FROM s
		UNION ALL
		SELECT 'g', b.id, b.namespace_id, b.role_id, b.resource_kind, b.resource_id, b.created_at, CAST(r.permissions AS TEXT), NULL, NULL
		FROM s JOIN iam_access_bindings b ON b.subject_id = s.user_id JOIN iam_roles r ON r.id = b.role_id
		UNION ALL
		SELECT 'r', x.id, x.namespace_id, x.action, x.resource_kind, x.resource_id, x.created_at, x.effect, NULL, NULL
		FROM s JOIN iam_restrictions x ON x.subject_id = s.user_id) a`, tokenHash)
	if err != nil {
		return store.Session{}, store.Access{}, err
	}
	var se store.Session
	found := false
	acc := store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}
	grants := rs[:0]
	for _, r := range rs {
		if r.tag != "s" {
			grants = append(grants, r)
			continue
		}
		if r.expiresAt == nil || r.lastUsedAt == nil {
			return store.Session{}, store.Access{}, s.dbErr(op, errors.New("sqlstore: NULL in a NOT NULL time column"))
		}
		se = store.Session{ID: r.id, TokenHash: tokenHash, UserID: r.roleOrAction,
			ExpiresAt: *r.expiresAt, CreatedAt: r.createdAt, LastUsedAt: *r.lastUsedAt}
		found = true
	}
	if !found {
		return store.Session{}, store.Access{}, s.getErr(op, "session", sql.ErrNoRows)
	}
	slices.SortFunc(grants, func(a, b sessionAccessRow) int {
		if c := a.createdAt.Compare(b.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	for _, r := range grants {
		if err := r.addTo(&acc, se.UserID); err != nil {
			return store.Session{}, store.Access{}, s.dbErr(op, err)
		}
	}
	return se, acc, nil
}

// sessionAccessRow is one row of GetSessionAccess: a grant or a
// restriction, or (tag 's') the session with its two other times.
type sessionAccessRow struct {
	accessRow
	expiresAt, lastUsedAt *time.Time
}

func scanSessionAccessRow(row rowScanner) (sessionAccessRow, error) {
	var r sessionAccessRow
	err := row.Scan(&r.tag, &r.id, optStringCol{&r.namespaceID}, &r.roleOrAction, optStringCol{&r.kind},
		optStringCol{&r.resourceID}, timeCol{&r.createdAt}, optStringCol{&r.last},
		optTimeCol{&r.expiresAt}, optTimeCol{&r.lastUsedAt})
	return r, err
}

// GetAPIKeyAccess is GetAPIKey, GetServicePrincipal and ListAccess of the
// principal in one statement: the key joined to its principal (tag 'k',
// with the principal's columns in the last four) and the principal's
// grants and restrictions as ListAccess reads them, found from the key.
// No key (or no principal) is no row at all, so NotFound.
//
// It reads through the read cache (readcache.go), as GetSessionAccess
// does.
func (s *Store) GetAPIKeyAccess(ctx context.Context, id string) (store.APIKey, store.ServicePrincipal, store.Access, error) {
	r, err := cachedRead(ctx, s, "get api key access", cacheKey("apikey", id),
		func(r apiKeyAccess) apiKeyAccess {
			r.key.SecretHash = slices.Clone(r.key.SecretHash)
			r.key.RevokedAt, r.key.LastUsedAt = cloneTime(r.key.RevokedAt), cloneTime(r.key.LastUsedAt)
			r.access = cloneAccess(r.access)
			return r
		},
		func() (apiKeyAccess, error) {
			k, sp, acc, err := s.getAPIKeyAccess(ctx, id)
			return apiKeyAccess{key: k, principal: sp, access: acc}, err
		})
	return r.key, r.principal, r.access, err
}

func (s *Store) getAPIKeyAccess(ctx context.Context, id string) (store.APIKey, store.ServicePrincipal, store.Access, error) {
	fail := func(err error) (store.APIKey, store.ServicePrincipal, store.Access, error) {
		return store.APIKey{}, store.ServicePrincipal{}, store.Access{}, err
	}
	rows, err := s.query(ctx, `WITH k AS (SELECT k.id, k.service_principal_id, k.namespace_id, k.name, k.secret_hash, k.created_by,
				k.expires_at, k.revoked_at, k.created_at, k.last_used_at,
				p.name AS sp_name, p.namespace_id AS sp_namespace_id, p.agent_id AS sp_agent_id, p.created_at AS sp_created_at
			FROM api_keys k JOIN service_principals p ON p.id = k.service_principal_id WHERE k.id = ?)
		SELECT 'k', id, namespace_id, service_principal_id, NULL, NULL, created_at, name,
			secret_hash, created_by, expires_at, revoked_at, last_used_at, sp_name, sp_namespace_id, sp_agent_id, sp_created_at FROM k
		UNION ALL
		SELECT 'g', b.id, b.namespace_id, b.role_id, b.resource_kind, b.resource_id, b.created_at, CAST(r.permissions AS TEXT),
			NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
		FROM k JOIN iam_access_bindings b ON b.subject_id = k.service_principal_id JOIN iam_roles r ON r.id = b.role_id
		UNION ALL
		SELECT 'r', x.id, x.namespace_id, x.action, x.resource_kind, x.resource_id, x.created_at, x.effect,
			NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
		FROM k JOIN iam_restrictions x ON x.subject_id = k.service_principal_id
		ORDER BY 7, 2`, id)
	if err != nil {
		return fail(s.dbErr("get API key access", err))
	}
	defer rows.Close()
	var key store.APIKey
	var sp store.ServicePrincipal
	found := false
	var rs []accessRow
	for rows.Next() {
		var r accessRow
		var secretHash []byte
		var createdBy, spName, spNamespaceID, spAgentID string
		var expiresAt, revokedAt, lastUsedAt, spCreatedAt *time.Time
		if err := rows.Scan(&r.tag, &r.id, optStringCol{&r.namespaceID}, &r.roleOrAction, optStringCol{&r.kind},
			optStringCol{&r.resourceID}, timeCol{&r.createdAt}, optStringCol{&r.last},
			&secretHash, optStringCol{&createdBy}, optTimeCol{&expiresAt}, optTimeCol{&revokedAt}, optTimeCol{&lastUsedAt},
			optStringCol{&spName}, optStringCol{&spNamespaceID}, optStringCol{&spAgentID}, optTimeCol{&spCreatedAt}); err != nil {
			return fail(s.dbErr("get API key access", err))
		}
		if r.tag != "k" {
			rs = append(rs, r)
			continue
		}
		if expiresAt == nil || spCreatedAt == nil {
			return fail(s.dbErr("get API key access", errors.New("sqlstore: NULL in a NOT NULL time column")))
		}
		key = store.APIKey{ID: r.id, ServicePrincipalID: r.roleOrAction, NamespaceID: r.namespaceID, Name: r.last,
			SecretHash: secretHash, CreatedBy: createdBy, ExpiresAt: *expiresAt, RevokedAt: revokedAt,
			CreatedAt: r.createdAt, LastUsedAt: lastUsedAt}
		sp = store.ServicePrincipal{ID: r.roleOrAction, Name: spName, NamespaceID: spNamespaceID, AgentID: spAgentID,
			CreatedAt: *spCreatedAt}
		found = true
	}
	if err := rows.Err(); err != nil {
		return fail(s.dbErr("get API key access", err))
	}
	if !found {
		return fail(s.getErr("get API key access", "API key", sql.ErrNoRows))
	}
	acc := store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}
	for _, r := range rs {
		if err := r.addTo(&acc, sp.ID); err != nil {
			return fail(s.dbErr("get API key access", err))
		}
	}
	return key, sp, acc, nil
}

// accessRow is one row of the unions of ListAccess, GetSessionAccess and
// GetAPIKeyAccess: a
// grant (tag 'g': the binding, its role's id and permissions) or a
// restriction (tag 'r': its action and effect).
type accessRow struct {
	tag, id, namespaceID, roleOrAction, kind, resourceID, last string
	createdAt                                                  time.Time
}

// addTo appends r to acc as subjectID's grant or restriction.
func (r accessRow) addTo(acc *store.Access, subjectID string) error {
	switch r.tag {
	case "g":
		g := store.Grant{Binding: store.AccessBinding{ID: r.id, NamespaceID: r.namespaceID, SubjectID: subjectID,
			RoleID: r.roleOrAction, ResourceKind: store.ResourceKind(r.kind), ResourceID: r.resourceID, CreatedAt: r.createdAt}}
		if err := (permissionsCol{&g.Permissions}).Scan(r.last); err != nil {
			return err
		}
		if g.Permissions == nil {
			g.Permissions = []store.Permission{}
		}
		acc.Grants = append(acc.Grants, g)
	default:
		acc.Restrictions = append(acc.Restrictions, store.Restriction{ID: r.id, NamespaceID: r.namespaceID, SubjectID: subjectID,
			Action: store.Action(r.roleOrAction), ResourceKind: store.ResourceKind(r.kind), ResourceID: r.resourceID,
			Effect: r.last, CreatedAt: r.createdAt})
	}
	return nil
}

// ---- restrictions ----

const restrictionColumns = `id, namespace_id, subject_id, action, resource_kind, resource_id, effect, created_at`

func scanRestriction(r rowScanner) (store.Restriction, error) {
	var re store.Restriction
	var action, kind string
	err := r.Scan(&re.ID, optStringCol{&re.NamespaceID}, &re.SubjectID, &action, &kind,
		optStringCol{&re.ResourceID}, &re.Effect, timeCol{&re.CreatedAt})
	re.Action, re.ResourceKind = store.Action(action), store.ResourceKind(kind)
	return re, err
}

// CreateRestriction stores Effect "deny" when it is empty; any other effect
// is refused by the schema (Invalid).
func (s *Store) CreateRestriction(ctx context.Context, r store.Restriction) error {
	effect := r.Effect
	if effect == "" {
		effect = "deny"
	}
	_, err := s.exec(ctx, `INSERT INTO iam_restrictions (`+restrictionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, nullString(r.NamespaceID), r.SubjectID, string(r.Action), string(r.ResourceKind),
		nullString(r.ResourceID), effect, s.t(r.CreatedAt))
	return s.dbErr("create restriction", err)
}

func (s *Store) GetRestriction(ctx context.Context, id string) (store.Restriction, error) {
	re, err := scanRestriction(s.queryRow(ctx, `SELECT `+restrictionColumns+` FROM iam_restrictions WHERE id = ?`, id))
	return re, s.getErr("get restriction", "restriction", err)
}

// ListRestrictions returns every restriction, oldest first.
func (s *Store) ListRestrictions(ctx context.Context, p store.PageRequest) (store.Page[store.Restriction], error) {
	return listPage(ctx, s, "list restrictions", scanRestriction,
		func(r store.Restriction) store.PageCursor { return store.PageCursor{CreatedAt: r.CreatedAt, ID: r.ID} },
		`SELECT `+restrictionColumns+` FROM iam_restrictions`, "WHERE", p)
}

func (s *Store) DeleteRestriction(ctx context.Context, id string) error {
	return s.execOne(ctx, "delete restriction", "restriction", `DELETE FROM iam_restrictions WHERE id = ?`, id)
}

// ListSubjectRestrictions returns the restrictions naming the subject,
// oldest first.
func (s *Store) ListSubjectRestrictions(ctx context.Context, subjectID string) ([]store.Restriction, error) {
	return list(ctx, s, "list subject restrictions", scanRestriction,
		`SELECT `+restrictionColumns+` FROM iam_restrictions WHERE subject_id = ? ORDER BY created_at, id`, subjectID)
}

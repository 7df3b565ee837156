package sqlstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: Namespaces and the Configurations they own.

// ---- namespaces ----

const namespaceColumns = `id, name, status, created_at, updated_at`

// namespaceDest reads namespaceColumns into ns.
func namespaceDest(ns *store.Namespace) []any {
	return []any{&ns.ID, &ns.Name, (*string)(&ns.Status), timeCol{&ns.CreatedAt}, timeCol{&ns.UpdatedAt}}
}

func scanNamespace(r rowScanner) (store.Namespace, error) {
	var ns store.Namespace
	err := r.Scan(namespaceDest(&ns)...)
	return ns, err
}

func (s *Store) CreateNamespace(ctx context.Context, ns store.Namespace) error {
	_, err := s.exec(ctx, `INSERT INTO namespaces (`+namespaceColumns+`) VALUES (?, ?, ?, ?, ?)`,
		ns.ID, ns.Name, string(ns.Status), s.t(ns.CreatedAt), s.t(ns.UpdatedAt))
	if err != nil && s.d.classify(err) == failUnique {
		return conflict("", "a namespace with this name or id already exists", err)
	}
	return s.dbErr("create namespace", err)
}

func (s *Store) GetNamespace(ctx context.Context, id string) (store.Namespace, error) {
	ns, err := scanNamespace(s.queryRow(ctx, `SELECT `+namespaceColumns+` FROM namespaces WHERE id = ?`, id))
	return ns, s.getErr("get namespace", "namespace", err)
}

// ListNamespaces returns one page of Namespaces, oldest first: on
// PostgreSQL by the index namespaces_created_idx; on SQLite read packed
// from the covering index namespaces_page_idx alone, whose expression must
// stay the packed form of namespaceColumns (sqlite migration 00006).
// It reads through the read cache (readcache.go).
func (s *Store) ListNamespaces(ctx context.Context, p store.PageRequest) (store.Page[store.Namespace], error) {
	return cachedRead(ctx, s, "list namespaces", cacheKey(append([]string{"namespaces"}, pageKey(p)...)...), clonePage[store.Namespace],
		func() (store.Page[store.Namespace], error) { return s.listNamespaces(ctx, p) })
}

func (s *Store) listNamespaces(ctx context.Context, p store.PageRequest) (store.Page[store.Namespace], error) {
	return listPage(ctx, s, "list namespaces", into(namespaceDest),
		func(n store.Namespace) store.PageCursor { return store.PageCursor{CreatedAt: n.CreatedAt, ID: n.ID} },
		`SELECT `+packedIndexed(namespaceColumns)+` FROM namespaces`, "WHERE", p)
}

// UpdateNamespaceStatus sets a Namespace's status, except that a deleting
// Namespace stays deleting: a reconcile that read it before the deletion
// began and reports its outcome afterwards must not reopen it to new
// resources. That case is Conflict (RESOURCE_CONFLICT), and the row is
// unchanged.
func (s *Store) UpdateNamespaceStatus(ctx context.Context, id string, status store.NamespaceStatus, at time.Time) error {
	switch status {
	case store.NamespaceProvisioning, store.NamespaceReady, store.NamespaceFailed, store.NamespaceDeleting:
	default:
		// The schema's CHECK would say so too, but the guard below could
		// hide it behind the deleting case.
		return errkind.Newf(errkind.Invalid, "unknown namespace status %q", status)
	}
	q := `UPDATE namespaces SET status = ?, updated_at = ? WHERE id = ? AND status <> 'deleting'`
	if status == store.NamespaceDeleting {
		q = `UPDATE namespaces SET status = ?, updated_at = ? WHERE id = ?`
	}
	return s.inTx(ctx, func(tx *Store) error {
		res, err := tx.exec(ctx, q, string(status), tx.t(at), id)
		if err != nil {
			return tx.dbErr("update namespace status", err)
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return tx.dbErr("update namespace status", err)
		}
		ok, err := tx.exists(ctx, "update namespace status", `SELECT 1 FROM namespaces WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("namespace")
		}
		return conflict("", "the namespace is being deleted", nil)
	})
}

// DeleteNamespace deletes an empty Namespace. The emptiness check gives the
// specific error without aborting a caller's PostgreSQL transaction; the
// RESTRICT foreign keys from agents and configurations are the backstop
// against a concurrent insert and map to the same error.
func (s *Store) DeleteNamespace(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *Store) error {
		ok, err := tx.exists(ctx, "delete namespace", `SELECT 1 FROM namespaces WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("namespace")
		}
		used, err := tx.exists(ctx, "delete namespace",
			`SELECT 1 WHERE EXISTS (SELECT 1 FROM agents WHERE namespace_id = ?)
			             OR EXISTS (SELECT 1 FROM configurations WHERE namespace_id = ?)`, id, id)
		if err != nil {
			return err
		}
		if used {
			return conflict(errkind.CodeNamespaceNotEmpty, "the namespace still contains agents or configurations", nil)
		}
		_, err = tx.exec(ctx, `DELETE FROM namespaces WHERE id = ?`, id)
		if err != nil && tx.d.classify(err) == failForeignKey {
			return conflict(errkind.CodeNamespaceNotEmpty, "the namespace still contains agents or configurations", err)
		}
		return tx.dbErr("delete namespace", err)
	})
}

// MarkNamespaceDeleting sets an empty Namespace's status to deleting, so
// the worker can tear it down. The row is locked FOR UPDATE while emptiness
// is checked; CreateAgent and CreateConfiguration lock it FOR SHARE and
// refuse a deleting Namespace, so no Agent or Configuration can slip in
// between the check and the status change. Marking a deleting Namespace
// again returns it unchanged.
func (s *Store) MarkNamespaceDeleting(ctx context.Context, id string, at time.Time) (store.Namespace, error) {
	var out store.Namespace
	err := s.inTx(ctx, func(tx *Store) error {
		ns, err := scanNamespace(tx.queryRow(ctx,
			`SELECT `+namespaceColumns+` FROM namespaces WHERE id = ?`+tx.d.forUpdate(), id))
		if err != nil {
			return tx.getErr("mark namespace deleting", "namespace", err)
		}
		if ns.Status == store.NamespaceDeleting {
			out = ns
			return nil
		}
		used, err := tx.exists(ctx, "mark namespace deleting",
			`SELECT 1 WHERE EXISTS (SELECT 1 FROM agents WHERE namespace_id = ?)
			             OR EXISTS (SELECT 1 FROM configurations WHERE namespace_id = ?)`, id, id)
		if err != nil {
			return err
		}
		if used {
			return conflict(errkind.CodeNamespaceNotEmpty, "the namespace still contains agents or configurations", nil)
		}
		out, err = scanNamespace(tx.queryRow(ctx,
			`UPDATE namespaces SET status = ?, updated_at = ? WHERE id = ? RETURNING `+namespaceColumns,
			string(store.NamespaceDeleting), tx.t(at), id))
		return tx.getErr("mark namespace deleting", "namespace", err)
	})
	if err != nil {
		return store.Namespace{}, err
	}
	return out, nil
}

// lockNamespaceForInsert takes a share lock on the Namespace row for the rest
// of the transaction (a concurrent MarkNamespaceDeleting waits for it) and
// returns its status. A missing Namespace is NotFound.
func (s *Store) lockNamespaceForInsert(ctx context.Context, op, namespaceID string) (store.NamespaceStatus, error) {
	var status string
	err := s.queryRow(ctx, `SELECT status FROM namespaces WHERE id = ?`+s.d.forShare(), namespaceID).Scan(&status)
	if err != nil {
		return "", s.getErr(op, "namespace", err)
	}
	return store.NamespaceStatus(status), nil
}

// ---- configurations ----

const configurationColumns = `id, namespace_id, name, kind, document, generation, created_at, updated_at`

func scanConfiguration(r rowScanner) (store.Configuration, error) {
	var c store.Configuration
	err := r.Scan(&c.ID, &c.NamespaceID, &c.Name, &c.Kind, jsonCol{&c.Document}, &c.Generation,
		timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	return c, err
}

// documentArg passes a document as text, byte for byte. A nil document is
// NULL, which the schema refuses (Invalid).
func documentArg(doc json.RawMessage) any {
	if doc == nil {
		return nil
	}
	return string(doc)
}

// CreateConfiguration stores c as given; Generation is the caller's (1 for
// a new Configuration; the schema refuses less). A missing Namespace is
// NotFound; a deleting one is Conflict RESOURCE_CONFLICT (see
// MarkNamespaceDeleting).
func (s *Store) CreateConfiguration(ctx context.Context, c store.Configuration) error {
	return s.inTx(ctx, func(tx *Store) error {
		status, err := tx.lockNamespaceForInsert(ctx, "create configuration", c.NamespaceID)
		if err != nil {
			return err
		}
		if status == store.NamespaceDeleting {
			return conflict("", "the namespace is being deleted", nil)
		}
		_, err = tx.exec(ctx, `INSERT INTO configurations (`+configurationColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.NamespaceID, c.Name, c.Kind, documentArg(c.Document), c.Generation, tx.t(c.CreatedAt), tx.t(c.UpdatedAt))
		if err != nil && tx.d.classify(err) == failUnique {
			return conflict("", "a configuration with this name or id already exists in the namespace", err)
		}
		return tx.dbErr("create configuration", err)
	})
}

func (s *Store) GetConfiguration(ctx context.Context, namespaceID, id string) (store.Configuration, error) {
	c, err := scanConfiguration(s.queryRow(ctx,
		`SELECT `+configurationColumns+` FROM configurations WHERE namespace_id = ? AND id = ?`, namespaceID, id))
	return c, s.getErr("get configuration", "configuration", err)
}

// ListConfigurations returns one page of the Namespace's Configurations,
// oldest first (index configurations_namespace_created_idx).
func (s *Store) ListConfigurations(ctx context.Context, namespaceID string, p store.PageRequest) (store.Page[store.Configuration], error) {
	return listPage(ctx, s, "list configurations", scanConfiguration,
		func(c store.Configuration) store.PageCursor {
			return store.PageCursor{CreatedAt: c.CreatedAt, ID: c.ID}
		},
		`SELECT `+configurationColumns+` FROM configurations WHERE namespace_id = ?`, "AND", p, namespaceID)
}

// UpdateConfiguration replaces name and document, sets updated_at to
// c.UpdatedAt and increments the generation in the same statement, so
// concurrent updates each get their own generation.
// It runs in a transaction so that, on SQLite, it passes the write gate
// (a RETURNING write is a query, and queries do not).
func (s *Store) UpdateConfiguration(ctx context.Context, c store.Configuration) (store.Configuration, error) {
	var out store.Configuration
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		out, err = scanConfiguration(tx.queryRow(ctx,
			`UPDATE configurations SET name = ?, document = ?, generation = generation + 1, updated_at = ?
			 WHERE namespace_id = ? AND id = ?
			 RETURNING `+configurationColumns,
			c.Name, documentArg(c.Document), tx.t(c.UpdatedAt), c.NamespaceID, c.ID))
		return err
	})
	if err != nil && s.d.classify(err) == failUnique {
		return store.Configuration{}, conflict("", "a configuration with this name already exists in the namespace", err)
	}
	if err != nil {
		return store.Configuration{}, s.getErr("update configuration", "configuration", err)
	}
	return out, nil
}

// DeleteConfiguration refuses while an Agent references the Configuration
// (pre-check for a clean error, RESTRICT foreign key as the backstop).
func (s *Store) DeleteConfiguration(ctx context.Context, namespaceID, id string) error {
	return s.inTx(ctx, func(tx *Store) error {
		ok, err := tx.exists(ctx, "delete configuration",
			`SELECT 1 FROM configurations WHERE namespace_id = ? AND id = ?`, namespaceID, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("configuration")
		}
		used, err := tx.exists(ctx, "delete configuration",
			`SELECT 1 FROM agents WHERE namespace_id = ? AND configuration_id = ? LIMIT 1`, namespaceID, id)
		if err != nil {
			return err
		}
		if used {
			return conflict("", "the configuration is used by an agent", nil)
		}
		_, err = tx.exec(ctx, `DELETE FROM configurations WHERE namespace_id = ? AND id = ?`, namespaceID, id)
		if err != nil && tx.d.classify(err) == failForeignKey {
			return conflict("", "the configuration is used by an agent", err)
		}
		return tx.dbErr("delete configuration", err)
	})
}

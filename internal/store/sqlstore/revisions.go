package sqlstore

import (
	"context"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: agent revisions, the immutable snapshots deployments run. The
// schema refuses UPDATE on agent_revisions; rows go only with their Agent.

const revisionColumns = `id, namespace_id, agent_id, revision_number, configuration_id, configuration_kind,
	configuration_generation, configuration, compute_driver_id, created_by, created_at`

func scanRevision(r rowScanner) (store.Revision, error) {
	var rev store.Revision
	err := r.Scan(&rev.ID, &rev.NamespaceID, &rev.AgentID, &rev.Number, &rev.ConfigurationID, &rev.ConfigurationKind,
		&rev.ConfigurationGeneration, jsonCol{&rev.Configuration}, &rev.ComputeDriverID, &rev.CreatedBy,
		timeCol{&rev.CreatedAt})
	return rev, err
}

// CreateRevision stores r with the Agent's next revision number (r.Number is
// ignored). The Agent row is locked FOR UPDATE while the number is chosen,
// so concurrent deployments of one Agent get 1, 2, 3... without gaps or
// clashes. A deleting Agent is Conflict AGENT_DELETING.
func (s *Store) CreateRevision(ctx context.Context, r store.Revision) (store.Revision, error) {
	var out store.Revision
	err := s.inTx(ctx, func(tx *Store) error {
		var status string
		err := tx.queryRow(ctx, `SELECT status FROM agents WHERE namespace_id = ? AND id = ?`+tx.d.forUpdate(),
			r.NamespaceID, r.AgentID).Scan(&status)
		if err != nil {
			return tx.getErr("create revision", "agent", err)
		}
		if store.AgentStatus(status) != store.AgentActive {
			return conflict(errkind.CodeAgentDeleting, "the agent is being deleted", nil)
		}
		var next int64
		err = tx.queryRow(ctx, `SELECT COALESCE(MAX(revision_number), 0) + 1 FROM agent_revisions
			WHERE namespace_id = ? AND agent_id = ?`, r.NamespaceID, r.AgentID).Scan(&next)
		if err != nil {
			return tx.dbErr("create revision", err)
		}
		out, err = scanRevision(tx.queryRow(ctx,
			`INSERT INTO agent_revisions (`+revisionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+revisionColumns,
			r.ID, r.NamespaceID, r.AgentID, next, r.ConfigurationID, r.ConfigurationKind, r.ConfigurationGeneration,
			documentArg(r.Configuration), r.ComputeDriverID, r.CreatedBy, tx.t(r.CreatedAt)))
		if err != nil && tx.d.classify(err) == failUnique {
			return conflict("", "a revision with this id already exists", err)
		}
		return tx.dbErr("create revision", err)
	})
	if err != nil {
		return store.Revision{}, err
	}
	return out, nil
}

func (s *Store) GetRevision(ctx context.Context, namespaceID, agentID, id string) (store.Revision, error) {
	rev, err := scanRevision(s.queryRow(ctx,
		`SELECT `+revisionColumns+` FROM agent_revisions WHERE namespace_id = ? AND agent_id = ? AND id = ?`,
		namespaceID, agentID, id))
	return rev, s.getErr("get revision", "revision", err)
}

// ListRevisions returns one page of the Agent's revisions by number, oldest
// first. The cursor names the previous page's last revision; the page
// seeks past its number on the (namespace_id, agent_id, revision_number)
// key. A cursor naming no revision of the Agent gives an empty last page.
// A limit outside 1..store.MaxPageSize is Invalid.
func (s *Store) ListRevisions(ctx context.Context, namespaceID, agentID string, p store.PageRequest) (store.Page[store.Revision], error) {
	if p.Limit < 1 || p.Limit > store.MaxPageSize {
		return store.Page[store.Revision]{}, errkind.Newf(errkind.Invalid, "the page size must be between 1 and %d", store.MaxPageSize)
	}
	q := `SELECT ` + revisionColumns + ` FROM agent_revisions WHERE namespace_id = ? AND agent_id = ?`
	args := []any{namespaceID, agentID}
	if p.After != nil {
		q += ` AND revision_number > (SELECT r.revision_number FROM agent_revisions r
			WHERE r.namespace_id = ? AND r.agent_id = ? AND r.id = ?)`
		args = append(args, namespaceID, agentID, p.After.ID)
	}
	q += ` ORDER BY revision_number LIMIT ?`
	args = append(args, p.Limit+1)
	items, err := listCap(ctx, s, "list revisions", scanRevision, p.Limit+1, q, args...)
	if err != nil {
		return store.Page[store.Revision]{}, err
	}
	out := store.Page[store.Revision]{Items: items}
	if len(items) > p.Limit {
		out.Items = items[:p.Limit]
		last := items[p.Limit-1]
		out.Next = &store.PageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return out, nil
}

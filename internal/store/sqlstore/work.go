package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: the durable work queue (controller_work) and the activation
// transaction.
//
// A claim is (claim_token, lease_expires_at) on a running row. Every
// operation that acts on a claim names its token in the WHERE clause, so a
// worker whose lease expired and was claimed by another worker changes
// nothing: it gets Conflict and must stop.

const workColumns = `id, work_kind, idempotency_key, namespace_id, agent_id, revision_id, actor_id, state,
	available_at, attempt_count, claim_token, lease_expires_at, completed_at, reason_code, last_error,
	progress, created_at, updated_at`

func scanWork(r rowScanner) (store.WorkItem, error) {
	var w store.WorkItem
	var state string
	var lease, completed *time.Time
	err := r.Scan(&w.ID, &w.Kind, &w.IdempotencyKey, optStringCol{&w.NamespaceID}, optStringCol{&w.AgentID},
		optStringCol{&w.RevisionID}, optStringCol{&w.ActorID}, &state, timeCol{&w.AvailableAt}, &w.Attempts,
		optStringCol{&w.ClaimToken}, optTimeCol{&lease}, optTimeCol{&completed}, optStringCol{&w.ReasonCode},
		optStringCol{&w.LastError}, jsonCol{&w.LastAttempt}, timeCol{&w.CreatedAt}, timeCol{&w.UpdatedAt})
	w.State = store.WorkState(state)
	if lease != nil {
		w.LeaseExpiresAt = *lease
	}
	if completed != nil {
		w.CompletedAt = *completed
	}
	if w.LastAttempt != nil {
		w.LastAttempt.At = w.LastAttempt.At.UTC()
	}
	return w, err
}

// optTime stores the zero time as NULL.
func (s *Store) optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return s.t(t)
}

// attemptArg encodes a work attempt as JSON, its time in UTC microseconds
// like every other stored time.
func attemptArg(a *store.WorkAttempt) (any, error) {
	if a == nil {
		return nil, nil
	}
	v := *a
	v.At = v.At.UTC().Truncate(time.Microsecond)
	return jsonArg(v)
}

// EnqueueWork inserts w unless an item with its idempotency key exists, and
// returns the stored item either way (the existing one unchanged). An empty
// State is queued.
func (s *Store) EnqueueWork(ctx context.Context, w store.WorkItem) (store.WorkItem, error) {
	if w.State == "" {
		w.State = store.WorkQueued
	}
	attempt, err := attemptArg(w.LastAttempt)
	if err != nil {
		return store.WorkItem{}, err
	}
	var out store.WorkItem
	err = s.inTx(ctx, func(tx *Store) error {
		if w.NamespaceID != "" {
			// An Agent's work runs in creation order, so creation order
			// must be the order in which its items were queued. The
			// caller read the clock before it took the Agent's row lock
			// (every caller holds it: the revision, the runtime state or
			// the deletion it writes with the item), so two requests can
			// commit in the other order than their clocks, and replicas'
			// clocks differ: an item is made to come after every
			// unfinished item of the Agent already committed. A Namespace's
			// own work (no Agent) is dated the same way; its repair is
			// queued without the Namespace's row lock, so a repair and a
			// delete committed at once may be dated in either order,
			// which is harmless: they never run side by side (ClaimWork),
			// and a repair that runs after the delete finds the Namespace
			// deleting or gone and is cancelled.
			var last *time.Time
			q, args := `SELECT MAX(created_at) FROM controller_work
				WHERE namespace_id = ? AND agent_id = ? AND state IN ('queued', 'running')`, []any{w.NamespaceID, w.AgentID}
			if w.AgentID == "" {
				q, args = `SELECT MAX(created_at) FROM controller_work
				WHERE namespace_id = ? AND agent_id IS NULL AND state IN ('queued', 'running')`, []any{w.NamespaceID}
			}
			err := tx.queryRow(ctx, q, args...).Scan(optTimeCol{&last})
			if err != nil {
				return tx.dbErr("enqueue work", err)
			}
			if last != nil && !w.CreatedAt.After(*last) {
				w.CreatedAt = last.Add(time.Microsecond)
			}
		}
		res, err := tx.exec(ctx, `INSERT INTO controller_work (`+workColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (idempotency_key) DO NOTHING`,
			w.ID, w.Kind, w.IdempotencyKey, nullString(w.NamespaceID), nullString(w.AgentID), nullString(w.RevisionID),
			nullString(w.ActorID), string(w.State), tx.t(w.AvailableAt), w.Attempts, nullString(w.ClaimToken),
			tx.optTime(w.LeaseExpiresAt), tx.optTime(w.CompletedAt), nullString(w.ReasonCode), nullString(w.LastError),
			attempt, tx.t(w.CreatedAt), tx.t(w.UpdatedAt))
		if err != nil && tx.d.classify(err) == failUnique {
			return conflict("", "a work item with this id already exists", err)
		}
		if err != nil {
			return tx.dbErr("enqueue work", err)
		}
		if n, err := res.RowsAffected(); err == nil && n > 0 && w.State == store.WorkQueued {
			*tx.enqueued = true // told after the outermost commit
		}
		out, err = scanWork(tx.queryRow(ctx, `SELECT `+workColumns+` FROM controller_work WHERE idempotency_key = ?`, w.IdempotencyKey))
		return tx.getErr("enqueue work", "work item", err)
	})
	if err != nil {
		return store.WorkItem{}, err
	}
	return out, nil
}

// workHooks are the functions OnWorkQueued registered.
type workHooks struct {
	mu  sync.Mutex
	fns []func()
}

func (h *workHooks) tell() {
	h.mu.Lock()
	fns := h.fns
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// OnWorkQueued registers fn to be called after every commit that queued new
// work through this store (EnqueueWork inserting a queued item, in its own
// transaction or an enclosing one), so that a worker in this process can
// claim it at once instead of at its next poll. fn runs on the committing
// goroutine and must not block (a non-blocking channel send). Work queued by
// other processes is not told: their workers still find it by polling, and
// nothing is lost when fn is never called. Not told: a rolled-back
// transaction, an idempotency key that already existed.
func (s *Store) OnWorkQueued(fn func()) {
	s.queued.mu.Lock()
	defer s.queued.mu.Unlock()
	s.queued.fns = append(s.queued.fns, fn)
}

func (s *Store) GetWork(ctx context.Context, id string) (store.WorkItem, error) {
	w, err := scanWork(s.queryRow(ctx, `SELECT `+workColumns+` FROM controller_work WHERE id = ?`, id))
	return w, s.getErr("get work", "work item", err)
}

func (s *Store) GetWorkByKey(ctx context.Context, key string) (store.WorkItem, error) {
	w, err := scanWork(s.queryRow(ctx, `SELECT `+workColumns+` FROM controller_work WHERE idempotency_key = ?`, key))
	return w, s.getErr("get work", "work item", err)
}

// ClaimWork claims the oldest claimable item (by creation, then id). An item
// is claimable when it is queued and due, or running with an expired lease,
// and no older unfinished item exists for the same Agent, nor another of
// its items held under a live lease, so one Agent's work runs in order
// (EnqueueWork keeps creation order the order of queueing), one item at a
// time. A Namespace's own work (no Agent: its reconcile, repair and
// delete) is ordered the same way among itself, so that its deletion never
// runs beside a reconcile that would create again what the deletion
// removes. On PostgreSQL the candidate row is locked FOR UPDATE SKIP
// LOCKED: a replica skips rows another replica is claiming instead of
// waiting. An older item that another replica holds locked still counts as
// unfinished (it is queued or running in every snapshot), so ordering holds.
func (s *Store) ClaimWork(ctx context.Context, c store.Claim) (store.WorkItem, bool, error) {
	if c.Token == "" || c.Lease <= 0 {
		return store.WorkItem{}, false, errkind.New(errkind.Invalid, "a claim needs a token and a positive lease")
	}
	var out store.WorkItem
	found := false
	err := s.inTx(ctx, func(tx *Store) error {
		now := tx.t(c.Now)
		var id string
		// ahead: o is unfinished and older than w, or holds a live lease.
		const ahead = `((o.state IN ('queued', 'running')
				        AND (o.created_at < w.created_at OR (o.created_at = w.created_at AND o.id < w.id)))
				    OR (o.state = 'running' AND o.lease_expires_at > ? AND o.id <> w.id))`
		err := tx.queryRow(ctx, `SELECT w.id FROM controller_work w
			WHERE ((w.state = 'queued' AND w.available_at <= ?) OR (w.state = 'running' AND w.lease_expires_at <= ?))
			  AND NOT EXISTS (
				SELECT 1 FROM controller_work o
				WHERE o.namespace_id = w.namespace_id AND o.agent_id = w.agent_id AND `+ahead+`)
			  AND (w.agent_id IS NOT NULL OR NOT EXISTS (
				SELECT 1 FROM controller_work o
				WHERE o.namespace_id = w.namespace_id AND o.agent_id IS NULL AND `+ahead+`))
			ORDER BY w.created_at, w.id
			LIMIT 1`+tx.d.forUpdateSkipLocked(), now, now, now, now).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return tx.dbErr("claim work", err)
		}
		out, err = scanWork(tx.queryRow(ctx, `UPDATE controller_work
			SET state = 'running', claim_token = ?, lease_expires_at = ?, attempt_count = attempt_count + 1, updated_at = ?
			WHERE id = ? RETURNING `+workColumns,
			c.Token, tx.t(c.Now.Add(c.Lease)), now, id))
		if err != nil {
			return tx.dbErr("claim work", err)
		}
		found = true
		return nil
	})
	if err != nil || !found {
		return store.WorkItem{}, false, err
	}
	return out, true, nil
}

// RenewWork moves the lease of a claim the token still holds to until.
func (s *Store) RenewWork(ctx context.Context, id, token string, until time.Time) error {
	return s.onClaim(ctx, "renew work", id, token,
		`UPDATE controller_work SET lease_expires_at = ? WHERE id = ? AND claim_token = ? AND state = 'running'`,
		s.t(until), id, token)
}

// RetryWork releases the claim and requeues the item for availableAt,
// recording the attempt as the item's last attempt and last error. An
// attempt that is not counted takes the claim's increment of
// attempt_count back.
func (s *Store) RetryWork(ctx context.Context, id, token string, availableAt time.Time, attempt store.WorkAttempt, counted bool) error {
	a, err := attemptArg(&attempt)
	if err != nil {
		return err
	}
	uncount := 1
	if counted {
		uncount = 0
	}
	return s.onClaim(ctx, "retry work", id, token,
		`UPDATE controller_work
		 SET state = 'queued', claim_token = NULL, lease_expires_at = NULL, available_at = ?,
		     progress = ?, last_error = ?, updated_at = ?, attempt_count = attempt_count - ?
		 WHERE id = ? AND claim_token = ? AND state = 'running'`,
		s.t(availableAt), a, nullString(attempt.Message), s.t(attempt.At), uncount, id, token)
}

// FinishWork ends a claimed item in a final state with a reason code and a
// public message.
func (s *Store) FinishWork(ctx context.Context, id, token string, state store.WorkState, reasonCode, message string, now time.Time) error {
	switch state {
	case store.WorkSucceeded, store.WorkFailedPermanent, store.WorkCancelled:
	default:
		return errkind.Newf(errkind.Invalid, "%q is not a final work state", state)
	}
	return s.onClaim(ctx, "finish work", id, token,
		`UPDATE controller_work
		 SET state = ?, reason_code = ?, last_error = ?, completed_at = ?, claim_token = NULL, lease_expires_at = NULL, updated_at = ?
		 WHERE id = ? AND claim_token = ? AND state = 'running'`,
		string(state), nullString(reasonCode), nullString(message), s.t(now), s.t(now), id, token)
}

// onClaim runs an UPDATE guarded by the claim token. No row updated means a
// missing item (NotFound) or a lost claim (Conflict).
func (s *Store) onClaim(ctx context.Context, op, id, token, query string, args ...any) error {
	if token == "" {
		return errkind.New(errkind.Invalid, "a claim token is required")
	}
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return s.dbErr(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return s.dbErr(op, err)
	}
	if n > 0 {
		return nil
	}
	ok, err := s.exists(ctx, op, `SELECT 1 FROM controller_work WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("work item")
	}
	return conflict("", "the work item is no longer claimed with this token", nil)
}

// CancelAgentWork cancels the Agent's queued items of the given kinds.
// Running items are left to their worker. No kinds cancels nothing.
func (s *Store) CancelAgentWork(ctx context.Context, namespaceID, agentID string, kinds []string, now time.Time) (int64, error) {
	var total int64
	for _, kind := range kinds {
		res, err := s.exec(ctx, `UPDATE controller_work SET state = 'cancelled', completed_at = ?, updated_at = ?
			WHERE namespace_id = ? AND agent_id = ? AND work_kind = ? AND state = 'queued'`,
			s.t(now), s.t(now), namespaceID, agentID, kind)
		if err != nil {
			return total, s.dbErr("cancel agent work", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, s.dbErr("cancel agent work", err)
		}
		total += n
	}
	return total, nil
}

// ExpediteAgentWork makes the Agent's queued items due at now when they
// were due later (store.Store's contract).
func (s *Store) ExpediteAgentWork(ctx context.Context, namespaceID, agentID string, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `UPDATE controller_work SET available_at = ?, updated_at = ?
		WHERE namespace_id = ? AND agent_id = ? AND state = 'queued' AND available_at > ?`,
		s.t(now), s.t(now), namespaceID, agentID, s.t(now))
	if err != nil {
		return 0, s.dbErr("expedite agent work", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.dbErr("expedite agent work", err)
	}
	return n, nil
}

// ActivateRevision is the activation transaction. In order, with the rows
// locked: the work item must still be claimed with a.ClaimToken and its
// lease unexpired at a.Now; the Agent must be active with desired state
// running; the revision must belong to the Agent. Then the revision becomes
// the Agent's active revision, the pending setup a.SetupID (if any) is
// completed (already completed is fine; a different or missing setup is
// not), and the work item is finished as succeeded. Any failed check is
// Conflict and nothing changes.
func (s *Store) ActivateRevision(ctx context.Context, a store.Activation) error {
	return s.inTx(ctx, func(tx *Store) error {
		const op = "activate revision"
		held, err := tx.exists(ctx, op, `SELECT 1 FROM controller_work
			WHERE id = ? AND claim_token = ? AND state = 'running' AND lease_expires_at > ?`+tx.d.forUpdate(),
			a.WorkID, a.ClaimToken, tx.t(a.Now))
		if err != nil {
			return err
		}
		if !held || a.ClaimToken == "" {
			return conflict(store.ActivationClaimLost, "the work item is no longer claimed with this token", nil)
		}
		var status, desired string
		err = tx.queryRow(ctx, `SELECT status, desired_runtime_state FROM agents WHERE namespace_id = ? AND id = ?`+tx.d.forUpdate(),
			a.NamespaceID, a.AgentID).Scan(&status, &desired)
		if errors.Is(err, sql.ErrNoRows) {
			return conflict(store.ActivationAgentGone, "the agent no longer exists", nil)
		}
		if err != nil {
			return tx.dbErr(op, err)
		}
		if store.AgentStatus(status) != store.AgentActive {
			return conflict(errkind.CodeAgentDeleting, "the agent is being deleted", nil)
		}
		if store.RuntimeState(desired) != store.RuntimeRunning {
			return conflict(store.ActivationAgentStopped, "the agent no longer wants to run", nil)
		}
		ok, err := tx.exists(ctx, op, `SELECT 1 FROM agent_revisions WHERE namespace_id = ? AND agent_id = ? AND id = ?`,
			a.NamespaceID, a.AgentID, a.RevisionID)
		if err != nil {
			return err
		}
		if !ok {
			return conflict("", "the revision does not belong to the agent", nil)
		}
		if _, err := tx.exec(ctx, `UPDATE agents SET active_revision_id = ?, updated_at = ? WHERE namespace_id = ? AND id = ?`,
			a.RevisionID, tx.t(a.Now), a.NamespaceID, a.AgentID); err != nil {
			return tx.dbErr(op, err)
		}
		if a.SetupID != "" {
			_, err := tx.CompleteWorkspaceSetup(ctx, a.NamespaceID, a.AgentID, a.SetupID)
			if errkind.Is(err, errkind.NotFound) {
				return conflict("", "the agent's workspace setup does not match", err)
			}
			if err != nil {
				return err
			}
		}
		// The work item stays claimed: the worker retires older revisions
		// and then finishes it, so that the Agent's next item cannot start
		// while this one still acts on the backend.
		return nil
	})
}

package sqlstore_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestPostgresStatementTimeoutIsUnavailable: a statement PostgreSQL
// cancels on the operator's statement_timeout (SQLSTATE 57014), here one
// waiting on a row another transaction holds, answers 503 like SQLite's
// busy timeout, not 500.
func TestPostgresStatementTimeoutIsUnavailable(t *testing.T) {
	st, raw := testdb.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	ns := store.Namespace{ID: ids.New(ids.Namespace), Name: "locked", Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now}
	if err := st.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("statement_timeout", "200") // a run-time parameter, in milliseconds
	u.RawQuery = q.Encode()
	timed, err := sqlstore.Open(ctx, u.String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer timed.Close()

	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM namespaces WHERE id = $1 FOR UPDATE`, ns.ID); err != nil {
		t.Fatal(err)
	}
	err = timed.UpdateNamespaceStatus(ctx, ns.ID, store.NamespaceFailed, now)
	if k := errkind.KindOf(err); k != errkind.Unavailable {
		t.Fatalf("an update cancelled by statement_timeout: kind %v (%v), want Unavailable (503)", k, err)
	}
}

package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// This file: online backups of the embedded SQLite database.

// BackupTo writes a consistent copy of the SQLite database to path, which
// must not exist, while the database stays in use: VACUUM INTO reads one
// snapshot (a WAL read transaction, so writers carry on beside it) and
// writes a compact file with no free pages and no WAL, so nothing erased
// before the snapshot (see secure_delete in sqliteDSN) is carried over.
//
// The file is created first with mode 0600 (it holds password hashes,
// service key hashes and staged workspace files) and synced to disk before
// BackupTo returns. On failure the partial file is removed. PostgreSQL is
// refused: its backups are pg_dump's job (docs/reliability.md).
func (s *Store) BackupTo(ctx context.Context, path string) (err error) {
	if s.d.engine() != EngineSQLite {
		return errors.New("sqlstore: occ backup copies the embedded SQLite database; back up PostgreSQL with pg_dump (docs/reliability.md)")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sqlstore: create backup file: %w", err)
	}
	_ = f.Close()
	defer func() {
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	// VACUUM INTO accepts an existing empty file, keeping its mode.
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return s.dbErr("back up the database", err)
	}
	f, err = os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlstore: reopen backup file: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sqlstore: sync backup file: %w", err)
	}
	return f.Close()
}

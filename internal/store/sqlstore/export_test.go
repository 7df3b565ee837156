package sqlstore

import "context"

// MigrateDownForTest rolls every migration back, so tests can prove the
// Down sections drop everything the Up sections create.
func MigrateDownForTest(ctx context.Context, s *Store) error {
	p, err := s.migrationProvider()
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, 0)
	return err
}

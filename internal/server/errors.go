package server

import "github.com/openclaw/occ/internal/errkind"

func unavailable(err error) error {
	return errkind.Wrap(errkind.Unavailable, "The database is not reachable.", err)
}

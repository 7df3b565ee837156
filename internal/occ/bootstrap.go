package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// MaxPasswordFileBytes bounds the bootstrap password file read.
const MaxPasswordFileBytes = 4096

// BootstrapInput configures first-run setup.
type BootstrapInput struct {
	AdminEmail string
	// PasswordFile names a file holding the administrator password (one
	// trailing newline is ignored). Empty: a password is generated and
	// written once to Out.
	PasswordFile string
	Out          io.Writer
}

// Bootstrap creates the installation, the built-in roles and the first
// administrator (bound to the administrator role installation-wide) in one
// transaction, the first time OCC starts on a database. On later starts it
// does nothing. Two servers racing on one database are safe: the loser's
// transaction fails on the installation's uniqueness and it carries on.
//
// The generated password goes only to Out (the operator's terminal), never
// to logs or the audit record.
func (s *Service) Bootstrap(ctx context.Context, in BootstrapInput) (created bool, err error) {
	ctx = authz.WithSubject(ctx, authz.SystemSubject(authz.SystemBootstrap))
	if _, err := s.store.GetInstallation(ctx); err == nil {
		return false, nil
	} else if !errkind.Is(err, errkind.NotFound) {
		return false, err
	}
	email := in.AdminEmail
	if email == "" {
		email = "admin@localhost"
	}
	if err := validateEmail(email); err != nil {
		return false, fmt.Errorf("bootstrap administrator email: %w", err)
	}
	password, generated, err := bootstrapPassword(in.PasswordFile)
	if err != nil {
		return false, err
	}
	hash, err := authn.HashPassword(ctx, password)
	if err != nil {
		return false, fmt.Errorf("bootstrap administrator password: %w", err)
	}
	now := s.clock()
	inst := store.Installation{ID: ids.New(ids.Installation), Name: "occ", CreatedAt: now}
	admin := store.User{ID: ids.New(ids.User), Email: email, PasswordHash: hash, CreatedAt: now}
	err = s.store.InTx(ctx, func(tx store.Store) error {
		if err := tx.CreateInstallation(ctx, inst); err != nil {
			return err
		}
		for _, r := range authz.BuiltinRoles() {
			r.CreatedAt = now
			if err := tx.CreateRole(ctx, r); err != nil {
				return err
			}
		}
		if err := tx.CreateUser(ctx, admin); err != nil {
			return err
		}
		b := store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: admin.ID, RoleID: authz.RoleAdministratorID, CreatedAt: now}
		if err := tx.CreateAccessBinding(ctx, b); err != nil {
			return err
		}
		return s.audit.Record(ctx, tx, store.AuditEvent{
			Kind: store.AuditBootstrap, Action: "openclaw.installation.bootstrap",
			Resource: store.AuditResource{Kind: store.KindInstallation, ID: inst.ID},
			Outcome:  store.OutcomeSuccess, Details: map[string]string{"email": email, "subjectId": admin.ID},
		})
	})
	if err != nil {
		if e := errkind.As(err); e != nil && e.PublicCode() == errkind.CodeInstallationExists {
			return false, nil
		}
		return false, fmt.Errorf("bootstrap: %w", err)
	}
	if generated && in.Out != nil {
		fmt.Fprintf(in.Out, "\nOCC created the administrator %s with this password (shown once, not stored in clear):\n\n    %s\n\n", email, password)
	}
	return true, nil
}

func bootstrapPassword(path string) (password string, generated bool, err error) {
	if path == "" {
		return authn.GeneratePassword(), true, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("bootstrap password file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPasswordFileBytes+1))
	if err != nil {
		return "", false, fmt.Errorf("bootstrap password file: %w", err)
	}
	if len(b) > MaxPasswordFileBytes {
		return "", false, errors.New("bootstrap password file: larger than 4096 bytes")
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if p == "" {
		return "", false, errors.New("bootstrap password file: empty")
	}
	return p, false, nil
}

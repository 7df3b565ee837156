package occ

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Audit actions for Configurations.
const (
	ActionConfigurationCreate = "openclaw.configurations.create"
	ActionConfigurationUpdate = "openclaw.configurations.update"
	ActionConfigurationDelete = "openclaw.configurations.delete"
)

// MaxConfigurationBytes bounds a native configuration document.
const MaxConfigurationBytes = 48 << 10

// ConfigurationInput is what a caller supplies for a Configuration.
type ConfigurationInput struct {
	Name     string
	Kind     string
	Document json.RawMessage
}

func validateConfiguration(in ConfigurationInput) error {
	if err := validateName("/name", in.Name); err != nil {
		return err
	}
	if in.Kind != store.ConfigurationKindAgent {
		return errkind.InvalidDetails(`The configuration kind must be "agent".`, errkind.Detail{Path: "/kind", Code: errkind.DetailInvalidValue})
	}
	doc := bytes.TrimSpace(in.Document)
	if len(doc) == 0 || doc[0] != '{' {
		return errkind.InvalidDetails("The configuration document must be a JSON object.", errkind.Detail{Path: "/document", Code: errkind.DetailInvalidType})
	}
	if len(doc) > MaxConfigurationBytes {
		return errkind.InvalidDetails("The configuration document is too large.", errkind.Detail{Path: "/document", Code: errkind.DetailTooLong})
	}
	return nil
}

// compact normalises a document for storage so that generation changes are
// not caused by whitespace alone.
func compact(doc json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return nil, errkind.InvalidDetails("The configuration document is not valid JSON.", errkind.Detail{Path: "/document", Code: errkind.DetailInvalidType})
	}
	return b.Bytes(), nil
}

// CreateConfiguration stores a new Configuration at generation 1. The
// Namespace must exist and be visible.
func (s *Service) CreateConfiguration(ctx context.Context, namespaceID string, in ConfigurationInput) (store.Configuration, error) {
	if err := validateConfiguration(in); err != nil {
		return store.Configuration{}, err
	}
	doc, err := compact(in.Document)
	if err != nil {
		return store.Configuration{}, err
	}
	now := s.clock()
	c := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: namespaceID, Name: in.Name, Kind: in.Kind,
		Document: doc, Generation: 1, CreatedAt: now, UpdatedAt: now}
	err = s.store.InTx(ctx, func(tx store.Store) error {
		ns, err := tx.GetNamespace(ctx, namespaceID)
		if err != nil {
			return err
		}
		if ns.Status == store.NamespaceDeleting || ns.Status == store.NamespaceFailed {
			return errkind.New(errkind.Conflict, "The Namespace is not accepting new resources.")
		}
		if err := tx.CreateConfiguration(ctx, c); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionConfigurationCreate, resConfiguration(c), map[string]string{"name": c.Name, "generation": "1"})
	})
	return c, err
}

// GetConfiguration returns a visible Configuration.
func (s *Service) GetConfiguration(ctx context.Context, namespaceID, id string) (store.Configuration, error) {
	if _, err := s.store.GetNamespace(ctx, namespaceID); err != nil {
		return store.Configuration{}, err
	}
	return s.store.GetConfiguration(ctx, namespaceID, id)
}

// ListConfigurations returns one page of the visible Configurations of a
// Namespace.
func (s *Service) ListConfigurations(ctx context.Context, namespaceID string, q PageQuery) (Page[store.Configuration], error) {
	p, err := q.request()
	if err != nil {
		return Page[store.Configuration]{}, err
	}
	if _, err := s.store.GetNamespace(ctx, namespaceID); err != nil {
		return Page[store.Configuration]{}, err
	}
	page, err := s.store.ListConfigurations(ctx, namespaceID, p)
	if err != nil {
		return Page[store.Configuration]{}, err
	}
	return fromStorePage(page), nil
}

// ConfigurationPatch changes a Configuration; nil fields stay as they are.
type ConfigurationPatch struct {
	Name     *string
	Document json.RawMessage
}

// UpdateConfiguration applies a patch and increments the generation.
func (s *Service) UpdateConfiguration(ctx context.Context, namespaceID, id string, p ConfigurationPatch) (store.Configuration, error) {
	var out store.Configuration
	err := s.store.InTx(ctx, func(tx store.Store) error {
		cur, err := tx.GetConfiguration(ctx, namespaceID, id)
		if err != nil {
			return err
		}
		next := cur
		if p.Name != nil {
			next.Name = *p.Name
		}
		if p.Document != nil {
			next.Document = p.Document
		}
		if err := validateConfiguration(ConfigurationInput{Name: next.Name, Kind: next.Kind, Document: next.Document}); err != nil {
			return err
		}
		if next.Document, err = compact(next.Document); err != nil {
			return err
		}
		next.UpdatedAt = s.clock()
		if out, err = tx.UpdateConfiguration(ctx, next); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionConfigurationUpdate, resConfiguration(out),
			map[string]string{"name": out.Name, "generation": strconv.FormatInt(out.Generation, 10)})
	})
	return out, err
}

// DeleteConfiguration deletes a Configuration no Agent uses.
func (s *Service) DeleteConfiguration(ctx context.Context, namespaceID, id string) error {
	return s.store.InTx(ctx, func(tx store.Store) error {
		c, err := tx.GetConfiguration(ctx, namespaceID, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteConfiguration(ctx, namespaceID, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionConfigurationDelete, resConfiguration(c), map[string]string{"name": c.Name})
	})
}

func resConfiguration(c store.Configuration) store.AuditResource {
	return store.AuditResource{Kind: store.KindConfiguration, ID: c.ID, NamespaceID: c.NamespaceID}
}

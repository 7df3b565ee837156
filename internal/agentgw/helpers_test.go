package agentgw_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
)

// testCtx is the per-operation context of a test: the same 30 s the API
// gives a file operation.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// outcome is what a test compares of an error: zero for nil.
type outcome struct {
	Kind        agentgw.Kind
	Reason      string
	CurrentHash string
}

func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{}
	}
	var e *agentgw.Error
	if !errors.As(err, &e) {
		return outcome{Kind: -1, Reason: "not an *agentgw.Error: " + err.Error()}
	}
	return outcome{Kind: e.Kind, Reason: e.Reason, CurrentHash: e.CurrentHash}
}

func unavailable(reason string) outcome {
	return outcome{Kind: agentgw.Unavailable, Reason: reason}
}

func unknown(reason string) outcome {
	return outcome{Kind: agentgw.OutcomeUnknown, Reason: reason}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fileOf is the File a successful get or set of content returns.
func fileOf(name, content string) agentgw.File {
	return agentgw.File{Name: name, Content: content, Hash: sha(content), Size: int64(len(content))}
}

// preserve restores a workspace file of a shared gateway when the test
// ends, byte for byte (or removes it if it did not exist), so tests do not
// depend on each other's writes.
func preserve(t testing.TB, workspace, name string) {
	t.Helper()
	p := filepath.Join(workspace, name)
	old, err := os.ReadFile(p)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read %s: %v", p, err)
	}
	t.Cleanup(func() {
		if !existed {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("restore %s: %v", p, err)
			}
			return
		}
		if err := os.WriteFile(p, old, 0o644); err != nil {
			t.Errorf("restore %s: %v", p, err)
		}
	})
}

// onDisk reads a workspace file of a real gateway ("" and false if missing).
func onDisk(t testing.TB, workspace, name string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(workspace, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b), true
}

// noSecret fails if an error text leaks any of secrets.
func noSecret(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q contains a secret or file content", err)
		}
	}
}

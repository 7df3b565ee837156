package workspace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
)

// outcome is what a validation returned, in a form cmp can diff.
type outcome struct {
	Files   map[string]string
	Kind    errkind.Kind
	Code    string
	Message string
	Details []errkind.Detail
	Plain   string // text of an error that is not an *errkind.Error
}

func outcomeOf(files map[string]string, err error) outcome {
	o := outcome{Files: files}
	if err == nil {
		return o
	}
	if e := errkind.As(err); e != nil {
		o.Kind, o.Code, o.Message, o.Details = e.Kind, e.PublicCode(), e.Message, e.Details
	} else {
		o.Plain = err.Error()
	}
	return o
}

func accepted(files map[string]string) outcome { return outcome{Files: files} }

func refused(details ...errkind.Detail) outcome {
	return outcome{Kind: errkind.Invalid, Code: errkind.CodeInvalidRequest, Message: initialFilesMessage, Details: details}
}

// at is a detail for one key of the field, given as a JSON pointer token.
func at(token, code string) errkind.Detail {
	return errkind.Detail{Path: initialFilesPath + "/" + token, Code: code}
}

// atField is a detail for the field itself.
func atField(code string) errkind.Detail {
	return errkind.Detail{Path: initialFilesPath, Code: code}
}

// euros returns n three-byte runes.
func euros(n int) string { return strings.Repeat("€", n) }

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

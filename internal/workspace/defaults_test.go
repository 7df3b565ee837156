package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestDefaultsIdentity ties the embedded templates, Render, StringifyJS and
// the DefaultsID constant together: a template update without a new
// constant (or the reverse) fails here.
func TestDefaultsIdentity(t *testing.T) {
	if got := ComputeDefaultsID(Defaults()); got != DefaultsID {
		t.Fatalf("ComputeDefaultsID(Defaults()) = %s, want DefaultsID %s", got, DefaultsID)
	}
	if err := ValidateDefaultsID(DefaultsID); err != nil {
		t.Errorf("DefaultsID is not well-formed: %v", err)
	}
}

// TestDefaultsMatchBaseline checks the one rendered file whose digest was
// measured from `openclaw setup --baseline` of 2026.9.6.
func TestDefaultsMatchBaseline(t *testing.T) {
	sum := sha256.Sum256([]byte(Defaults()[AgentsMD]))
	if got := hex.EncodeToString(sum[:]); !strings.HasPrefix(got, "1e17784e") {
		t.Errorf("sha256(rendered AGENTS.md) = %s, want prefix 1e17784e", got)
	}
}

func TestDefaults(t *testing.T) {
	d := Defaults()
	if len(d) != len(Names) {
		t.Fatalf("Defaults() has %d entries, want %d", len(d), len(Names))
	}
	for _, name := range Names {
		content, ok := d[name]
		if !ok {
			t.Errorf("Defaults() lacks %s", name)
			continue
		}
		// Front matter is gone and every default passes the content rule,
		// so a create form can submit a default unchanged.
		if want := "# " + strings.TrimSuffix(name, ".md") + ".md - "; !strings.HasPrefix(content, want) {
			t.Errorf("rendered %s starts %q, want prefix %q", name, content[:min(len(content), 40)], want)
		}
		if strings.Contains(content, "read_when:") {
			t.Errorf("rendered %s still holds front matter", name)
		}
		if err := CheckContent(content); err != nil {
			t.Errorf("rendered %s breaks the content rule: %v", name, err)
		}
	}
	// Each call returns a copy.
	d[AgentsMD] = "changed"
	if Defaults()[AgentsMD] == "changed" {
		t.Error("Defaults() returned shared state")
	}
}

func TestComputeDefaultsID(t *testing.T) {
	// Expected values computed with Node:
	// crypto.createHash("sha256").update(JSON.stringify(entries)).digest("hex").
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			"empty files", // [["AGENTS.md",""],["SOUL.md",""],["IDENTITY.md",""],["USER.md",""]]
			map[string]string{"AGENTS.md": "", "SOUL.md": "", "IDENTITY.md": "", "USER.md": ""},
			"2c7102c15da4b7677e69cd27a86c66275753e07027175c7d6fbbafceecbea63f",
		},
		{
			"escaping matters", // [["AGENTS.md","<a>\u2028\"\n"],["SOUL.md","\u0001"],["IDENTITY.md","é"],["USER.md","\\"]]
			map[string]string{"AGENTS.md": "<a>\u2028\"\n", "SOUL.md": "\x01", "IDENTITY.md": "é", "USER.md": "\\"},
			"b39cdda21e2c886cabc0d8a72375fc6fb6968eb66c7798714d7e2adb07dfb22d",
		},
		{
			"missing name is null, extra keys ignored", // [["AGENTS.md","a"],["SOUL.md",null],["IDENTITY.md","i"],["USER.md","u"]]
			map[string]string{"AGENTS.md": "a", "IDENTITY.md": "i", "USER.md": "u", "MEMORY.md": "m"},
			"826621662f406d6b23ca26d100f9e25bc536878c86166556b024ca97490c909a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "ComputeDefaultsID", tt.want, ComputeDefaultsID(tt.files))
		})
	}
}

func TestRender(t *testing.T) {
	// Each want was produced by the reference runner's renderTemplate on
	// Node from the same bytes (read with readFileSync(file, "utf8")).
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"front matter", "---\ntitle: x\n---\n\n# Body\n", "# Body\n"},
		{"BOM dropped with front matter", "\uFEFF---\na: 1\n---\nBody", "Body"},
		{"CRLF normalized with front matter", "---\r\na: 1\r\n---\r\n\r\n# B\r\nline\r\n", "# B\nline\n"},
		{"lone CR normalized with front matter", "---\ra\r---\rB\rC", "B\nC"},
		{"mixed line endings", "---\r\na\n---\r\rB\r\n\rC\n", "B\n\nC\n"},
		{"no front matter keeps CRLF", "# Title\r\nBody\r\n", "# Title\r\nBody\r\n"},
		{"no front matter keeps BOM and CR", "\uFEFF# T\r\rx", "\uFEFF# T\r\rx"},
		{"unclosed front matter gives the original", "---\r\na: 1\r\nbody\r\n", "---\r\na: 1\r\nbody\r\n"},
		{"unclosed front matter keeps BOM", "\uFEFF---\na\n", "\uFEFF---\na\n"},
		{"whitespace after front matter stripped, trailing kept", "---\na\n---\n \t\n\u00A0\u3000\uFEFF\v\f\n# B  \n\n", "# B  \n\n"},
		{"U+0085 is not JS whitespace", "---\na\n---\n\u0085B", "\u0085B"},
		{"closing fence at the end", "---\na\n---", ""},
		{"closing fence with spaces at the end", "---\na\n--- \t", ""},
		{"fences with inline whitespace", "--- \t\na\n---\u00A0 \nB", "B"},
		{"U+2028 counts as inline whitespace", "---\u2028\na\n---\u2029\nB", "B"},
		{"U+0085 on the fence is not whitespace", "---\u0085\na\n---\nB", "---\u0085\na\n---\nB"},
		{"four dashes do not open", "----\na\n---\nB", "----\na\n---\nB"},
		{"four dashes do not close", "---\na\n----\n---\nB", "B"},
		{"text after the fence does not close", "---\na\n--- x\n---\nB", "B"},
		{"indented fence does not open", " ---\na\n---\nB", " ---\na\n---\nB"},
		{"indented fence does not close", "---\na\n ---\n---\nB", "B"},
		{"empty front matter", "---\n---\nB", "B"},
		{"front matter then nothing", "---\n", "---\n"},
		{"dashes alone", "---", "---"},
		{"later rules stay in the body", "---\na\n---\nx\n---\ny", "x\n---\ny"},
		{"two BOMs: only one is dropped", "\uFEFF\uFEFF---\na\n---\nB", "\uFEFF\uFEFF---\na\n---\nB"},
		{"invalid UTF-8 becomes U+FFFD per maximal subpart", "---\na\n---\n\xe2\x82B\xff\xf0\x9f\x98", "\uFFFDB\uFFFD\uFFFD"},
		{"invalid UTF-8 without front matter", "a\xe2\x82\xc0\xafb", "a\uFFFD\uFFFD\uFFFDb"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "Render", tt.want, Render([]byte(tt.in)))
		})
	}
}

package workspace

import (
	"embed"
	"strings"
	"sync"

	"github.com/openclaw/occ/internal/digest"
)

// Version is the OpenClaw release whose docs/reference/templates the
// embedded defaults were copied from. Keep it, the templates and DefaultsID
// together: TestDefaultsIdentity fails when they drift apart.
const Version = "2026.9.6"

// DefaultsID identifies the embedded defaults: the SHA-256 (hex) of the
// UTF-8 bytes of JSON.stringify([[name, rendered], ...]) in the order of
// Names. For 2026.9.6 it reproduces from the npm package; the reference's
// constant 1b26af59… does not, so it is not used.
const DefaultsID = "c017a28c6f49a9f34629782addcf4d4fe704ee7cb8e068efc6447016ebe22699"

// The raw templates, front matter included, exactly as the npm package
// ships them; rendering happens at run time with the same code the setup
// runner applies to the installed package, so both sides agree by
// construction.
//
//go:embed templates/AGENTS.md templates/SOUL.md templates/IDENTITY.md templates/USER.md
var templatesFS embed.FS

var defaults = sync.OnceValue(func() map[string]string {
	m := make(map[string]string, len(canonical))
	for _, name := range canonical {
		raw, err := templatesFS.ReadFile("templates/" + name)
		if err != nil {
			panic("workspace: embedded template missing: " + err.Error()) // build error
		}
		m[name] = Render(raw)
	}
	return m
})

// Defaults returns the four rendered default documents of Version, keyed
// by name: what `openclaw setup --baseline` seeds. The map is a fresh copy.
func Defaults() map[string]string {
	src := defaults()
	m := make(map[string]string, len(src))
	for k, v := range src {
		m[k] = v
	}
	return m
}

// ComputeDefaultsID returns the defaults identity of files: the SHA-256
// (lowercase hex) of the UTF-8 bytes of JSON.stringify of
// [["AGENTS.md", files["AGENTS.md"]], ...] in the order of Names.
// Other keys are ignored. A missing name is serialized as null, as
// JSON.stringify writes an undefined array element, so the result then
// matches no real defaults.
func ComputeDefaultsID(files map[string]string) string {
	entries := make([]any, 0, len(canonical))
	for _, name := range canonical {
		if content, ok := files[name]; ok {
			entries = append(entries, []string{name, content})
		} else {
			entries = append(entries, []any{name, nil})
		}
	}
	b, err := StringifyJS(entries)
	if err != nil {
		panic("workspace: " + err.Error()) // only supported types above
	}
	return digest.Of(b)
}

// Render renders one OpenClaw workspace template as the reference setup
// runner does, so that the result equals the file `openclaw setup
// --baseline` writes:
//
//  1. decode raw as Node's readFileSync(file, "utf8") does (ill-formed
//     UTF-8 becomes U+FFFD per maximal subpart; a BOM is kept);
//  2. on a copy, drop one leading U+FEFF and turn CRLF and lone CR into LF;
//  3. if that copy starts with a front-matter opening line ("---", then
//     optional non-newline whitespace, then LF), cut everything up to and
//     including the first later line that is "---" plus optional
//     non-newline whitespace (ended by LF or the end of the text), then
//     trim leading whitespace; JavaScript's \s decides what whitespace is;
//  4. otherwise, or when the front matter never closes, return the text
//     of step 1 unchanged: BOM, CR and all.
//
// The setup runner renders the installed package's templates with it.
func Render(raw []byte) string {
	content := toWellFormed(string(raw))
	normalized := strings.TrimPrefix(content, "\uFEFF")
	if strings.IndexByte(normalized, '\r') >= 0 {
		normalized = strings.ReplaceAll(normalized, "\r\n", "\n")
		normalized = strings.ReplaceAll(normalized, "\r", "\n")
	}
	tail, ok := strings.CutPrefix(normalized, "---")
	if !ok {
		return content
	}
	tail = strings.TrimLeftFunc(tail, isJSInlineSpace)
	tail, ok = strings.CutPrefix(tail, "\n")
	if !ok {
		return content
	}
	// Find the first line of tail that closes the front matter.
	for line := 0; line <= len(tail); {
		rest := tail[line:]
		if after, ok := strings.CutPrefix(rest, "---"); ok {
			after = strings.TrimLeftFunc(after, isJSInlineSpace)
			if after == "" {
				return ""
			}
			if after[0] == '\n' {
				return strings.TrimLeftFunc(after[1:], isJSSpace)
			}
		}
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		line += nl + 1
	}
	return content
}

// isJSSpace reports whether r matches JavaScript's \s: WhiteSpace
// (TAB, VT, FF, ZWNBSP and category Zs) and LineTerminator (LF, CR, LS, PS).
// unicode.IsSpace differs: it includes U+0085 and excludes U+FEFF.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00A0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// isJSInlineSpace matches the reference's [^\S\n]: \s without LF.
func isJSInlineSpace(r rune) bool { return r != '\n' && isJSSpace(r) }

package doclinks

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package's directory.
const root = "../.."

// linkRE matches a Markdown link or image target: ](target) with no
// spaces, optionally followed by a title.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestRelativeLinksResolve(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	if len(files) < 10 {
		t.Fatalf("found only %d Markdown files under %s; is the test running from its package directory?", len(files), root)
	}
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, f := range files {
		for _, l := range links(t, f) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", rel(f), l.line, l.target, err)
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				anchors[path] = headingAnchors(t, path)
			}
			if !anchors[path][frag] {
				t.Errorf("%s:%d: link to %s: %s has no heading with anchor #%s", rel(f), l.line, l.target, rel(path), frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d relative links; the link pattern no longer matches the docs", checked)
	}
}

// TestHeadingAnchors pins the anchor rules the link check relies on.
func TestHeadingAnchors(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.md")
	text := "# Title\n## Admission (every route but the probes)\n### `occ server`: flags, 3 December 2026, 20:55-21:05 UTC\n" +
		"## Same\n## Same\n```\n# not a heading in a code block\n```\n"
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got := headingAnchors(t, f)
	for _, want := range []string{"title", "admission-every-route-but-the-probes",
		"occ-server-flags-3-december-2026-2055-2105-utc", "same", "same-1"} {
		if !got[want] {
			t.Errorf("no anchor %q; have %v", want, got)
		}
	}
	if got["not-a-heading-in-a-code-block"] {
		t.Errorf("a line in a code block counted as a heading")
	}
}

type link struct {
	target string
	line   int
}

// links returns the link targets of a Markdown file outside fenced code
// blocks and inline code spans.
func links(t *testing.T, path string) []link {
	t.Helper()
	var out []link
	eachLine(t, path, func(n int, line string) {
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{target: m[1], line: n})
		}
	})
	return out
}

// headingAnchors returns the anchors GitHub gives a file's headings:
// lower case, punctuation other than '-' and '_' dropped, spaces made
// '-', and a repeated anchor numbered -1, -2, ...
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	eachLine(t, path, func(_ int, line string) {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			return
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			return
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	})
	return out
}

// eachLine calls fn for each line of path outside fenced code blocks.
func eachLine(t *testing.T, path string, fn func(n int, line string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			fn(n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// stripCode removes inline code spans, whose text is not a link.
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

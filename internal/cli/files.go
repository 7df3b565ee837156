package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/digest"
)

// fileView is what --output json|yaml shows of a read file: the API's
// {name, content} and the hash its ETag carries.
type fileView struct {
	Name    string `json:"name"`
	Content string `json:"content"`
	Hash    string `json:"hash"`
}

// writtenView is what --output json|yaml shows of a write: the API's
// {name, size} and the new ETag's hash.
type writtenView struct {
	Name string `json:"name"`
	Size int    `json:"size"`
	Hash string `json:"hash"`
}

var writtenCols = []column[writtenView]{
	{"NAME", func(w writtenView) string { return w.Name }},
	{"SIZE", func(w writtenView) string { return strconv.Itoa(w.Size) }},
	{"HASH", func(w writtenView) string { return w.Hash }},
}

func newFilesCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "files", "Read and write a running Agent's persona files safely",
		"  occ files get helper SOUL.md\n  occ files edit helper SOUL.md\n"+
			"  occ files put helper SOUL.md -f SOUL.md --if-match 3a4f…")
	addClientFlags(cmd, f, true)
	cmd.AddCommand(newFilesGetCmd(d, f), newFilesPutCmd(d, f), newFilesEditCmd(d, f))
	return cmd
}

// completeFileName completes the second argument with the four names.
func completeFileName(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 1 {
		return personaFiles, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

func newFilesGetCmd(d deps, f *clientFlags) *cobra.Command {
	var outFile string
	cmd := &cobra.Command{
		Use:   "get AGENT NAME [-o FILE]",
		Short: "Print a persona file of a running Agent (or save it to FILE)",
		Long: `Read NAME (AGENTS.md, SOUL.md, IDENTITY.md or USER.md) from the running
AGENT's workspace. The content goes to standard output as it is (with
--output table, the default), or to FILE with -o (mode 0600), and its hash
to standard error; --output json|yaml prints {name, content, hash}. Pass
the hash to "occ files put --if-match" to write only if nobody changed the
file since.`,
		Example:           "  occ files get helper SOUL.md\n  occ files get helper SOUL.md -o SOUL.md\n  occ files get helper USER.md --output json",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeFileName,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ns, id, err := cn.agentArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			file, err := cn.c.GetFile(cmd.Context(), ns, id, args[1])
			if err != nil {
				return apiError(err)
			}
			switch {
			case outFile != "":
				if err := writeFilePrivate(outFile, file.Content); err != nil {
					return runtimeError(fmt.Errorf("saving %s to %s: %w", file.Name, outFile, err))
				}
				cn.info("%s saved to %s (hash %s)", file.Name, outFile, file.Hash)
				return nil
			case cn.out.format == "table":
				cn.info("%s hash %s", file.Name, file.Hash)
				_, err := io.WriteString(cn.d.stdout, file.Content)
				return writeError(err)
			}
			return cn.out.printValue(fileView{Name: file.Name, Content: file.Content, Hash: file.Hash})
		}),
	}
	cmd.Flags().StringVarP(&outFile, "out", "o", "", "write the content to this file instead of standard output")
	return cmd
}

// writeFilePrivate writes content to path as a new file of mode 0600.
// os.WriteFile would truncate an existing file in place: it keeps that
// file's mode (a 0644 file stays readable by others) and leaves it cut
// short if the write fails. Instead the content goes to a temporary file,
// created 0600 in path's directory so that the rename stays on one file
// system, which then replaces path whole: path ends up either as it was
// or with the full content, never partly written.
//
// A path that names something other than a regular file (a device such as
// /dev/stdout, a directory, a symbolic link) is refused: the rename would
// replace it rather than write through it.
func writeFilePrivate(path, content string) (err error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file; name a new or regular file (without -o the content goes to stdout)", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp already makes the file 0600; Chmod says so explicitly,
	// whatever the umask or a later change to CreateTemp.
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := io.WriteString(tmp, content); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newFilesPutCmd(d deps, f *clientFlags) *cobra.Command {
	var inFile, ifMatch string
	var ifUnchanged bool
	cmd := &cobra.Command{
		Use:   "put AGENT NAME -f FILE [--if-match HASH | --if-unchanged]",
		Short: "Write a persona file of a running Agent, optionally with compare-and-swap",
		Long: `Write FILE (- for standard input) as NAME in the running AGENT's workspace.

--if-match HASH writes only if the file's hash is still HASH (as printed by
"occ files get"); otherwise nothing is written and occ exits 5. A HASH that
is not 64 lowercase hex digits, empty included, exits 2 without writing.
--if-unchanged reads the current hash first and writes with it, which only
protects against a write that lands between that read and this write; to
protect an edit made over minutes, use --if-match or "occ files edit".
Without either, the write is last-write-wins.

If the server cannot say whether the write landed (UNKNOWN_OUTCOME, or the
reply was lost), occ reads the file back and compares hashes: it reports a
write that landed as success, and otherwise exits 6 without retrying.`,
		Example: "  occ files put helper SOUL.md -f SOUL.md --if-match 3a4f…\n" +
			"  echo 'Be brief.' | occ files put helper SOUL.md -f - --if-unchanged",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeFileName,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			// Changed, not ifMatch != "": --if-match "" (an unset shell
			// variable, say) must not turn into an unconditional write.
			matching := cmd.Flags().Changed("if-match")
			if matching && ifUnchanged {
				return usageError(errors.New("pass at most one of --if-match and --if-unchanged"))
			}
			if matching && !digest.Valid(ifMatch) {
				return usageError(fmt.Errorf("--if-match %q is not a file hash (64 lowercase hex digits, as `occ files get` prints); "+
					"nothing was written. To write unconditionally, leave --if-match out", ifMatch))
			}
			content, err := readContent(d, inFile)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns, id, err := cn.agentArg(ctx, args[0])
			if err != nil {
				return err
			}
			if ifUnchanged {
				cur, err := cn.c.GetFile(ctx, ns, id, args[1])
				if err != nil {
					return apiError(err)
				}
				ifMatch = cur.Hash
			}
			hash, err := cn.putFile(ctx, ns, id, args[1], content, ifMatch)
			if err != nil {
				return err
			}
			return printOne(cn.out, writtenView{Name: args[1], Size: len(content), Hash: hash}, writtenCols)
		}),
	}
	cmd.Flags().StringVarP(&inFile, "file", "f", "", "the new content (- for standard input)")
	_ = cmd.MarkFlagRequired("file")
	cmd.Flags().StringVar(&ifMatch, "if-match", "", "write only if the file's current hash is this")
	cmd.Flags().BoolVar(&ifUnchanged, "if-unchanged", false, "write only if the file does not change between this command's read and write")
	return cmd
}

// maxFileBytes bounds what occ reads as a file's new content; the server
// refuses more than 16 KiB anyway and says so. Content past it is refused
// here, never cut to size.
const maxFileBytes = 1 << 20

func readContent(d deps, path string) (string, error) {
	b, err := readInput(d, path, "the content", "; a workspace file holds at most 16,384")
	return string(b), err
}

// readInput reads at most maxFileBytes from path ("-": standard input):
// one byte more is a usage error naming what, never input cut to size,
// and a FIFO or a device that never ends cannot hold the command. more
// follows the size in the message. A failure to read is classed by
// localFileError.
func readInput(d deps, path, what, more string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		if d.stdin == nil {
			return nil, usageError(errors.New("no standard input"))
		}
		r = d.stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, localFileError(fmt.Errorf("reading %s: %w", what, err))
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		// A directory opens and fails here (EISDIR).
		return nil, localFileError(fmt.Errorf("reading %s: %w", what, err))
	}
	if len(b) > maxFileBytes {
		return nil, usageError(fmt.Errorf("%s is larger than %d bytes%s", what, maxFileBytes, more))
	}
	return b, nil
}

// putFile writes a file and settles an unknown outcome by reading back
// (docs/files.md, "Resolving UNKNOWN_OUTCOME"). It never writes twice.
// Only a failure the client marks client.ErrNotSent (nothing of the
// request was written: a refused connection or proxy, a failed TLS
// handshake) skips the read-back; any other transport failure may have
// come after the server received the write.
func (cn *conn) putFile(ctx context.Context, ns, agentID, name, content, ifMatch string) (string, error) {
	_, hash, err := cn.c.PutFile(ctx, ns, agentID, name, content, ifMatch)
	if err == nil {
		return hash, nil
	}
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Code == "PRECONDITION_FAILED":
		cur, _ := ce.Data["currentHash"].(string)
		if cur == "" {
			cur = "none (the file is missing)"
		}
		return "", &exitError{code: exitConflict, err: &fileChangedError{fmt.Sprintf(
			"%s changed since you read it: its hash is now %s, not %s; nothing was written [%s, request %s]",
			name, cur, ifMatch, ce.Code, ce.RequestID)}}
	case errors.As(err, &ce) && ce.Code != "UNKNOWN_OUTCOME" && !proxyFailure(ce):
		// A definite answer, a redirect included (the client follows
		// none): the write was refused.
		return "", apiError(err)
	case ce == nil && errors.Is(err, client.ErrNotSent):
		return "", apiError(err)
	}
	// The write may or may not have landed: OCC said so, a proxy in front
	// of it failed (it may have passed the request on), or the reply was
	// lost, which includes an interrupt (Ctrl-C) after the request went
	// out. The read-back below runs on a context of its own.
	var why string
	switch {
	case ce == nil:
		why = "the reply to the write was lost (" + transportReason(err) + ")"
	case ce.Code == "UNKNOWN_OUTCOME":
		why = "the server could not confirm the write (UNKNOWN_OUTCOME)"
	default:
		why = fmt.Sprintf("a proxy in front of the server answered %d, and may have passed the write on", ce.Status)
	}
	mine := digest.Of(content)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cn.d.clientTimeout())
	defer cancel()
	cur, rerr := cn.c.GetFile(rctx, ns, agentID, name)
	if rerr != nil {
		return "", unknownOutcomeError("%s, and reading %s back failed (%v): the write may or may not have been applied; "+
			"read the file before writing again. Nothing was retried", why, name, apiError(rerr))
	}
	if cur.Hash == mine {
		cn.info("%s; read back: the write was applied (hash %s)", why, mine)
		return mine, nil
	}
	return "", unknownOutcomeError("%s; read back: %s has hash %s, not yours (%s), so the write was not applied or "+
		"someone wrote since. Nothing was retried; to write again, use --if-match %s", why, name, cur.Hash, mine, cur.Hash)
}

// proxyFailure reports whether a 5xx answer came without OCC's envelope
// (client.Error's HTTP_<status> code): from a proxy or load balancer in
// front of OCC (a 502 after the upstream reset, a 504 after its read
// timeout), which may have forwarded the write before it failed. OCC's
// own 5xx answers carry their code and say what happened.
func proxyFailure(ce *client.Error) bool {
	return ce.Status >= 500 && ce.Code == "HTTP_"+strconv.Itoa(ce.Status)
}

// fileChangedError is putFile's refusal of a write whose If-Match no
// longer held (412 PRECONDITION_FAILED): the one failure that `files edit`
// answers with its diff and overwrite prompt. Other conflicts (a 409: the
// Agent is stopping or being deleted) would refuse the overwrite as well.
type fileChangedError struct{ msg string }

func (e *fileChangedError) Error() string { return e.msg }

func newFilesEditCmd(d deps, f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "edit AGENT NAME",
		Short: "Edit a persona file of a running Agent in $EDITOR and save it with compare-and-swap",
		Long: `Read NAME from the running AGENT, open it in $VISUAL or $EDITOR (default vi)
in a private temporary file (mode 0600), and save your version only if the
file has not changed on the server since it was read.

If it has changed (someone else saved first: 412), occ shows a unified diff
of theirs against yours and asks: overwrite theirs with yours, re-edit
yours, or abort (your version is then kept in the temporary file, whose
path occ prints). The answer is read from standard input; end of input
aborts. Any other failure (a 409 while the Agent is stopping or being
deleted) exits with the server's message and keeps your version the same
way. An unknown outcome is settled by reading back, as "occ files put" does.`,
		Example:           "  occ files edit helper SOUL.md\n  EDITOR='code --wait' occ files edit helper AGENTS.md -n team-a",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeFileName,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ns, id, err := cn.agentArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cn.editFile(cmd.Context(), ns, id, args[1])
		}),
	}
}

// editFile is the edit loop of `occ files edit`.
func (cn *conn) editFile(ctx context.Context, ns, agentID, name string) error {
	file, err := cn.c.GetFile(ctx, ns, agentID, name)
	if err != nil {
		return apiError(err)
	}
	dir, err := os.MkdirTemp("", "occ-edit-")
	if err != nil {
		return runtimeError(err)
	}
	path := filepath.Join(dir, filepath.Base(name))
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(path, []byte(file.Content), 0o600); err != nil {
		return runtimeError(err)
	}
	kept := func(err error) error {
		keep = true
		cn.info("Your version is kept in %s.", path)
		return err
	}
	theirs, base := file.Content, file.Hash
	answers := bufio.NewReader(cn.d.stdin)
	edit := true
	for {
		if edit {
			if err := cn.runEditor(ctx, path); err != nil {
				return kept(err)
			}
		}
		b, err := readInput(cn.d, path, "your version", "; a workspace file holds at most 16,384")
		if err != nil {
			return kept(err)
		}
		mine := string(b)
		if mine == theirs {
			cn.info("%s: no changes; nothing written.", name)
			return nil
		}
		hash, err := cn.putFile(ctx, ns, agentID, name, mine, base)
		if err == nil {
			cn.info("%s saved (hash %s).", name, hash)
			return nil
		}
		var changed *fileChangedError
		if !errors.As(err, &changed) {
			return kept(err)
		}
		cur, gerr := cn.c.GetFile(ctx, ns, agentID, name)
		if gerr != nil {
			return kept(apiError(gerr))
		}
		fmt.Fprintf(cn.d.stderr, "%s changed on the server since you opened it. Their version against yours:\n%s",
			name, unifiedDiff(name+" (theirs, hash "+cur.Hash+")", name+" (yours)", cur.Content, mine))
		fmt.Fprint(cn.d.stderr, "[o]verwrite theirs with yours, [r]e-edit yours, [a]bort? ")
		line, rerr := answers.ReadString('\n')
		fmt.Fprintln(cn.d.stderr)
		theirs, base = cur.Content, cur.Hash
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "o", "overwrite":
			edit = false // save yours again, now against their hash
		case "r", "re-edit", "reedit":
			edit = true
		default:
			if rerr != nil && rerr != io.EOF {
				return kept(runtimeError(rerr))
			}
			return kept(conflictError("%s: aborted; nothing was written", name))
		}
	}
}

// runEditor runs the user's editor on path, through sh so that an
// editor setting with arguments ("code --wait") works as in other tools.
func (cn *conn) runEditor(ctx context.Context, path string) error {
	editor := cn.d.getenv("VISUAL")
	if editor == "" {
		editor = cn.d.getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "occ-edit", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cn.d.stdin, cn.d.stdout, cn.d.stderr
	if err := cmd.Run(); err != nil {
		return runtimeError(fmt.Errorf("the editor (%s) failed: %w", editor, err))
	}
	return nil
}

// localFileError classes a failure to read a local file (or standard
// input) as docs/cli.md's exit-code table does: a path that names nothing
// is a bad argument (exit 2, as a missing --files directory is); any
// other failure (permission denied, a directory, an I/O error) is a
// local file error (exit 1). err keeps fs.ErrNotExist in its chain.
func localFileError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return usageError(err)
	}
	return runtimeError(err)
}

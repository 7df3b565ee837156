package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/buildinfo"
	"github.com/openclaw/occ/internal/clientconfig"
)

// maxSecretBytes bounds a password or key read from a file or stdin.
const maxSecretBytes = 4096

func newLoginCmd(d deps) *cobra.Command {
	var (
		email, keyFile, name, namespace string
		passwordStdin                   bool
	)
	cmd := &cobra.Command{
		Use:   "login URL (--email EMAIL [--password-stdin] | --api-key-file FILE)",
		Short: "Sign in to an OCC server and save it as a context",
		Long: `Sign in to the OCC server at URL and save the credential as a context in
$XDG_CONFIG_HOME/occ/config.json (default ~/.config/occ; the file is mode
0600), which becomes the current context.

With --email, occ asks for the password without echoing it (standard input
must be a terminal), or reads it from standard input with --password-stdin;
the server's session is saved. With --api-key-file, the service key is read
from FILE (never from an argument, which other users could see) and checked
against the server. URL must be the server's public origin.`,
		Example: `  occ login http://127.0.0.1:8080 --email admin@localhost
  printf '%s' "$PASSWORD" | occ login https://occ.example.com --email ops@example.com --password-stdin
  occ login https://occ.example.com --api-key-file ~/.occ-key --name ci --namespace team-a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (email == "") == (keyFile == "") {
				return usageError(errors.New("pass exactly one of --email and --api-key-file"))
			}
			if passwordStdin && email == "" {
				return usageError(errors.New("--password-stdin goes with --email"))
			}
			server := strings.TrimSuffix(args[0], "/")
			u, err := url.Parse(server)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageError(fmt.Errorf("URL must be http:// or https:// with a host, like http://127.0.0.1:8080"))
			}
			if name == "" {
				name = u.Host
			}
			// The saved configuration is read before signing in: a file
			// that cannot be used (readable by others, not valid) then
			// fails login before the server creates a session that
			// nothing would hold.
			dir, cfg, err := loadClientConfig(d)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var cred clientconfig.Credential
			if email != "" {
				pw, err := readPassword(d, passwordStdin)
				if err != nil {
					return err
				}
				cred, err = signIn(ctx, server, email, pw, d.clientTimeout())
				if err != nil {
					return err
				}
			} else {
				key, err := readSecretFile(keyFile)
				if err != nil {
					return err
				}
				cred = clientconfig.Credential{Kind: clientconfig.KindKey, Key: key}
				c, err := newClient(server, cred, d.clientTimeout())
				if err != nil {
					return usageError(err)
				}
				s, err := c.Session(ctx)
				if err != nil {
					return loginError(err, "The key in "+keyFile+" was not accepted (expired, revoked or wrong).")
				}
				cred.SubjectID = s.Subject.ID
			}
			cfg.Contexts[name] = clientconfig.Context{Server: server, Namespace: namespace, Credential: cred}
			cfg.Current = name
			if err := clientconfig.Save(dir, cfg); err != nil {
				return runtimeError(fmt.Errorf("%w%s", err, endUnsavedSession(ctx, server, cred, d.clientTimeout())))
			}
			who := cred.Email
			if who == "" {
				who = cred.SubjectID
			}
			fmt.Fprintf(d.stderr, "Logged in to %s as %s; context %q is current.\n", server, who, name)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "sign in as this user")
	f.BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input (up to the first newline)")
	f.StringVar(&keyFile, "api-key-file", "", "authenticate with the service key in this file")
	f.StringVar(&name, "name", "", "name of the saved context (default: the URL's host, with its port if it has one)")
	f.StringVarP(&namespace, "namespace", "n", "", "default Namespace of the context (name or id; not checked until used)")
	return cmd
}

// readPassword reads the password from a terminal without echo, or from
// standard input with --password-stdin.
func readPassword(d deps, fromStdin bool) (string, error) {
	if fromStdin {
		if d.stdin == nil {
			return "", usageError(errors.New("no standard input to read the password from"))
		}
		b, err := io.ReadAll(io.LimitReader(d.stdin, maxSecretBytes+1))
		if err != nil {
			return "", runtimeError(fmt.Errorf("reading the password: %w", err))
		}
		if len(b) > maxSecretBytes {
			return "", usageError(fmt.Errorf("the password on standard input is longer than %d bytes", maxSecretBytes))
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[:i]
		}
		b = bytes.TrimSuffix(b, []byte("\r"))
		if len(b) == 0 {
			return "", usageError(errors.New("standard input held no password"))
		}
		return string(b), nil
	}
	fd, ok := stdinTerminal(d)
	if !ok {
		return "", usageError(errors.New("standard input is not a terminal: pass --password-stdin and pipe the password"))
	}
	fmt.Fprint(d.stderr, "Password: ")
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(d.stderr)
	if err != nil {
		return "", runtimeError(fmt.Errorf("reading the password: %w", err))
	}
	return string(b), nil
}

// readSecretFile reads a key from a file: trailing whitespace (a final
// newline) is dropped. The file's content never appears in an error. A
// failure to read is classed by localFileError, whether open or read
// reports it (a directory opens, then fails to read).
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", localFileError(fmt.Errorf("reading the key file: %w", err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", localFileError(fmt.Errorf("reading the key file: %w", err))
	}
	if len(b) > maxSecretBytes {
		return "", usageError(fmt.Errorf("the key file %s is longer than %d bytes", path, maxSecretBytes))
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", usageError(fmt.Errorf("the key file %s is empty", path))
	}
	return key, nil
}

// signIn signs in and returns the session credential: the cookie the
// server set, taken from the client's jar.
func signIn(ctx context.Context, server, email, password string, timeout time.Duration) (clientconfig.Credential, error) {
	u, err := url.Parse(server)
	if err != nil {
		return clientconfig.Credential{}, usageError(err)
	}
	jar, _ := cookiejar.New(nil) // never fails without options
	c, err := client.New(server, client.WithHTTPClient(&http.Client{Jar: jar}),
		client.WithUserAgent("occ/"+buildinfo.Version), client.WithTimeout(timeout))
	if err != nil {
		return clientconfig.Credential{}, usageError(err)
	}
	s, err := c.SignIn(ctx, email, password)
	if err != nil {
		return clientconfig.Credential{}, loginError(err, "The email or password was not accepted: check them and run `occ login` again.")
	}
	for _, ck := range jar.Cookies(u) {
		// occ_session, or __Host-occ_session on https.
		if strings.HasSuffix(ck.Name, "occ_session") {
			return clientconfig.Credential{Kind: clientconfig.KindSession, Email: sessionEmail(s, email),
				CookieName: ck.Name, CookieValue: ck.Value, SubjectID: s.Subject.ID}, nil
		}
	}
	return clientconfig.Credential{}, runtimeError(errors.New("the server signed you in but set no session cookie " +
		"for this URL: is URL the server's public origin?"))
}

// endUnsavedSession signs out a session that login could not save, so
// that the server holds no session that no one can use or end, and says
// how that went, as a sentence to append to the save error. A key is
// left alone: it was created elsewhere and is still the user's.
func endUnsavedSession(ctx context.Context, server string, cred clientconfig.Credential, timeout time.Duration) string {
	if cred.Kind != clientconfig.KindSession {
		return ""
	}
	c, err := newClient(server, cred, timeout)
	if err == nil {
		// The command's context may be what ended; the sign-out gets a
		// bounded one of its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		_, err = c.SignOut(sctx)
	}
	if err != nil {
		return fmt.Sprintf("; the session just signed in could not be ended (%v): it expires on its own", apiError(err))
	}
	return "; the session just signed in was ended on the server"
}

// loginError is apiError for the calls of `occ login`, with hint in place
// of the usual one for a 401: that one says the saved credential stopped
// working, but during login nothing saved is involved, and what the
// server refused is the email and password or the key just given.
func loginError(err error, hint string) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == 401 {
		return authError(errors.New(apiMessage(ce) + "\n" + hint))
	}
	return apiError(err)
}

func sessionEmail(s apitypes.Session, fallback string) string {
	if s.User != nil && s.User.Email != "" {
		return s.User.Email
	}
	return fallback
}

func newLogoutCmd(d deps) *cobra.Command {
	var ctxName string
	cmd := &cobra.Command{
		Use:   "logout",
		Short: "Sign out and forget the current (or named) context",
		Long: `Sign out of the current context (or --context NAME) and delete it from the
saved configuration, with its credential. A session is also ended on the
server; a service key stays valid (revoke it with "occ key revoke").`,
		Example: `  occ logout
  occ logout --context ci`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, cfg, err := loadClientConfig(d)
			if err != nil {
				return err
			}
			name, cur, err := resolveContext(cfg, ctxName)
			if err != nil {
				return err
			}
			if cur.Credential.Kind == clientconfig.KindSession {
				if c, err := newClient(cur.Server, cur.Credential, d.clientTimeout()); err == nil {
					if _, err := c.SignOut(cmd.Context()); err != nil {
						// The local copy goes anyway: the point of logging out
						// is that this machine no longer holds the session.
						fmt.Fprintf(d.stderr, "occ: the server did not end the session (%v); forgetting it here anyway\n", apiError(err))
					}
				}
			}
			delete(cfg.Contexts, name)
			if cfg.Current == name {
				cfg.Current = ""
			}
			if err := clientconfig.Save(dir, cfg); err != nil {
				return runtimeError(err)
			}
			fmt.Fprintf(d.stderr, "Logged out of context %q.\n", name)
			return nil
		},
	}
	cmd.Flags().StringVar(&ctxName, "context", "", "the context to log out of (default: the current one)")
	return cmd
}

// contextRow is what `occ context list` shows of a context: never its
// secret.
type contextRow struct {
	Name       string `json:"name"`
	Current    bool   `json:"current"`
	Server     string `json:"server"`
	Namespace  string `json:"namespace,omitempty"`
	Credential string `json:"credential"`
	Email      string `json:"email,omitempty"`
	SubjectID  string `json:"subjectId,omitempty"`
}

func newContextCmd(d deps) *cobra.Command {
	cmd := groupCmd(d, "context", "List and switch saved contexts (servers and credentials)",
		"  occ context list\n  occ context use ci --namespace team-a")
	var output string
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the saved contexts; the current one is marked",
		Example: "  occ context list\n  occ context list --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := newPrinter(d.stdout, output)
			if err != nil {
				return err
			}
			_, cfg, err := loadClientConfig(d)
			if err != nil {
				return err
			}
			var rows []contextRow
			for _, n := range cfg.Names() {
				c := cfg.Contexts[n]
				rows = append(rows, contextRow{Name: n, Current: n == cfg.Current, Server: c.Server, Namespace: c.Namespace,
					Credential: c.Credential.Kind, Email: c.Credential.Email, SubjectID: c.Credential.SubjectID})
			}
			return printList(p, rows, []column[contextRow]{
				{"CURRENT", func(r contextRow) string {
					if r.Current {
						return "*"
					}
					return " "
				}},
				{"NAME", func(r contextRow) string { return r.Name }},
				{"SERVER", func(r contextRow) string { return r.Server }},
				{"CREDENTIAL", func(r contextRow) string { return r.Credential }},
				{"AS", func(r contextRow) string {
					if r.Email != "" {
						return r.Email
					}
					return r.SubjectID
				}},
				{"NAMESPACE", func(r contextRow) string { return r.Namespace }},
			})
		},
	}
	list.Flags().StringVar(&output, "output", "table", "output format: table, json or yaml")
	var namespace string
	use := &cobra.Command{
		Use:   "use NAME [--namespace NS]",
		Short: "Make a saved context current, optionally setting its default Namespace",
		Long: `Make the context NAME current. With --namespace, also set its default
Namespace (a name or id; --namespace "" clears it), which every
Namespace-scoped command uses unless it is given --namespace.`,
		Example: `  occ context use 127.0.0.1:8080
  occ context use ci --namespace team-a`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			_, cfg, err := loadClientConfig(d)
			if err != nil || len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return cfg.Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cfg, err := loadClientConfig(d)
			if err != nil {
				return err
			}
			c, ok := cfg.Contexts[args[0]]
			if !ok {
				return notFoundError("no context named %q (see `occ context list`)", args[0])
			}
			if cmd.Flags().Changed("namespace") {
				c.Namespace = namespace
				cfg.Contexts[args[0]] = c
			}
			cfg.Current = args[0]
			if err := clientconfig.Save(dir, cfg); err != nil {
				return runtimeError(err)
			}
			fmt.Fprintf(d.stderr, "Context %q is current (server %s, Namespace %q).\n", args[0], c.Server, c.Namespace)
			return nil
		},
	}
	use.Flags().StringVarP(&namespace, "namespace", "n", "", "set the context's default Namespace")
	cmd.AddCommand(list, use)
	return cmd
}

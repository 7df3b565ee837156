package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/buildinfo"
	"github.com/openclaw/occ/internal/clientconfig"
)

// requestTimeout bounds each API call of a client command (the client
// applies it to a call whose context has no deadline of its own, and to
// each poll of a --wait). The --wait help texts and docs/cli.md give it.
const requestTimeout = 30 * time.Second

// clientTimeout is requestTimeout, or the shorter bound a test sets in
// d.requestTimeout.
func (d deps) clientTimeout() time.Duration {
	if d.requestTimeout > 0 {
		return d.requestTimeout
	}
	return requestTimeout
}

// clientFlags are the flags every client command shares.
type clientFlags struct {
	context   string
	output    string
	namespace string
}

// addClientFlags registers the shared flags on a command group;
// namespaced adds --namespace / -n, which Namespace-scoped commands read.
func addClientFlags(cmd *cobra.Command, f *clientFlags, namespaced bool) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.context, "context", "", "use this saved context instead of the current one (see occ context list)")
	pf.StringVar(&f.output, "output", "table", "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	if namespaced {
		pf.StringVarP(&f.namespace, "namespace", "n", "", "Namespace (name or id); default: the context's Namespace")
	}
}

// conn is what a client command works with: the saved configuration,
// the selected context and a client for it.
type conn struct {
	d       deps
	flags   *clientFlags
	cfgDir  string
	cfg     clientconfig.Config
	name    string
	current clientconfig.Context
	c       *client.Client
	out     printer
}

// loadClientConfig reads the saved contexts.
func loadClientConfig(d deps) (string, clientconfig.Config, error) {
	dir, err := clientconfig.Dir(d.getenv)
	if err != nil {
		return "", clientconfig.Config{}, runtimeError(err)
	}
	cfg, err := clientconfig.Load(dir)
	if err != nil {
		return "", clientconfig.Config{}, runtimeError(err)
	}
	return dir, cfg, nil
}

// connect opens the selected context.
func connect(d deps, f *clientFlags) (*conn, error) {
	p, err := newPrinter(d.stdout, f.output)
	if err != nil {
		return nil, err
	}
	dir, cfg, err := loadClientConfig(d)
	if err != nil {
		return nil, err
	}
	name, cur, err := resolveContext(cfg, f.context)
	if err != nil {
		return nil, err
	}
	c, err := newClient(cur.Server, cur.Credential, d.clientTimeout())
	if err != nil {
		return nil, runtimeError(err)
	}
	return &conn{d: d, flags: f, cfgDir: dir, cfg: cfg, name: name, current: cur, c: c, out: p}, nil
}

// resolveContext returns the context called name, or the current one
// when name is empty, with the exit code of the failure's class: no
// current context means not logged in (4); a name with no saved context is
// an unknown name (3), as in `occ context use`.
func resolveContext(cfg clientconfig.Config, name string) (string, clientconfig.Context, error) {
	n, cur, err := cfg.Resolve(name)
	switch {
	case errors.Is(err, clientconfig.ErrNoContext):
		return "", clientconfig.Context{}, authError(err)
	case err != nil:
		// Resolve's only other failure: no context has that name.
		return "", clientconfig.Context{}, &exitError{code: exitNotFound, err: err}
	}
	return n, cur, nil
}

// newClient builds a client for server with a saved credential, whose
// calls are bounded by timeout. A session is replayed as the cookie
// sign-in set, in a jar of its own.
func newClient(server string, cred clientconfig.Credential, timeout time.Duration) (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("occ/" + buildinfo.Version), client.WithTimeout(timeout)}
	switch cred.Kind {
	case clientconfig.KindKey:
		opts = append(opts, client.WithServiceKey(cred.Key))
	case clientconfig.KindSession:
		u, err := url.Parse(server)
		if err != nil {
			return nil, fmt.Errorf("the saved server URL is invalid: %w", err)
		}
		jar, _ := cookiejar.New(nil) // never fails without options
		jar.SetCookies(u, []*http.Cookie{{Name: cred.CookieName, Value: cred.CookieValue, Path: "/",
			Secure: u.Scheme == "https", HttpOnly: true}})
		opts = append(opts, client.WithHTTPClient(&http.Client{Jar: jar}))
	case "":
		// Not signed in (login before sign-in).
	default:
		return nil, fmt.Errorf("the saved credential has an unknown kind %q", cred.Kind)
	}
	return client.New(server, opts...)
}

// namespaceArg is the Namespace a command acts in: --namespace, else the
// context's default.
func (cn *conn) namespaceArg() (string, error) {
	if cn.flags.namespace != "" {
		return cn.flags.namespace, nil
	}
	if cn.current.Namespace != "" {
		return cn.current.Namespace, nil
	}
	return "", usageError(errors.New("no Namespace: pass --namespace NAME, or set a default with `occ context use " +
		cn.name + " --namespace NAME`"))
}

// namespaceID resolves the command's Namespace to its id.
func (cn *conn) namespaceID(ctx context.Context) (string, error) {
	arg, err := cn.namespaceArg()
	if err != nil {
		return "", err
	}
	return resolveNamespace(ctx, cn.c, arg)
}

// stdinTerminal reports whether d's standard input is a terminal, and
// its descriptor.
func stdinTerminal(d deps) (int, bool) {
	f, ok := d.stdin.(*os.File)
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

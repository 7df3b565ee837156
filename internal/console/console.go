package console

import (
	"bytes"
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/workspace"
)

//go:embed templates/*.html assets/*
var files embed.FS

// ContentSecurityPolicy is the policy of every Console response: scripts,
// styles and connections only from the OCC origin itself, no inline script
// or style, no plugins, no framing, forms only to the OCC origin.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// SecurityHeaders sets the browser policy of Console responses. It runs
// after httpx.SecurityHeaders (the API's stricter policy) and replaces what
// a page needs to differ: a script and style sheet of its own origin, and
// the same-origin referrer.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// Page is one Console page: a GET pattern of the server's mux and the
// template that renders it.
type Page struct {
	// Pattern is the net/http ServeMux pattern path (always GET).
	Pattern string
	// Name is the template and the page's data-page value for the script.
	Name string
	// Title is the page's title.
	Title string
	// Public pages render without a signed-in caller.
	Public bool
}

// Pages is the table of every Console page; docs/console.md lists the same
// patterns (TestDocsListEveryPage). "/" and "/console/" redirect to the
// Namespaces page, and the assets are served under /console/assets/.
var Pages = []Page{
	{"/console/sign-in", "sign-in", "Sign in", true},
	{"/console/namespaces", "namespaces", "Namespaces", false},
	{"/console/namespaces/{ns}", "agents", "Agents", false},
	{"/console/namespaces/{ns}/agents/new", "agent-new", "Create Agent", false},
	{"/console/namespaces/{ns}/agents/{agentId}", "agent", "Agent", false},
	{"/console/namespaces/{ns}/agents/{agentId}/files/{name}", "file", "Workspace file", false},
	{"/console/audit", "audit", "Audit log", false},
	{"/console/iam", "iam", "Identity and access", false},
}

// Decider is the part of the authorizing store the Console asks for
// permission hints: authz.Store.Decide, side-effect free.
type Decider interface {
	Decide(ctx context.Context, action store.Action, res authz.Resource) (authz.Decision, error)
}

// Mux is where the Console registers its handlers (httpx.Mux).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Console renders the pages.
type Console struct {
	authz Decider
	pages map[string]*template.Template
}

// New parses the embedded templates; it panics if they do not parse (they
// are part of the binary, and a test parses them).
func New(az Decider) *Console {
	c := &Console{authz: az, pages: map[string]*template.Template{}}
	for _, p := range append(Pages, Page{Name: "not-found"}) {
		c.pages[p.Name] = template.Must(template.New("layout.html").ParseFS(files,
			"templates/layout.html", "templates/"+p.Name+".html"))
	}
	return c
}

// Register adds the Console's routes to m: the pages, the redirects of /
// and /console/, and the assets.
func (c *Console) Register(m Mux) {
	home := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		http.Redirect(w, r, "/console/namespaces", http.StatusSeeOther)
	})
	m.Handle("GET /{$}", home)
	m.Handle("GET /console/{$}", home)
	for _, p := range Pages {
		m.Handle("GET "+p.Pattern, c.page(p))
	}
	// Any other path under /console/ is a Console 404 page, not the API's
	// JSON one.
	m.Handle("GET /console/", http.HandlerFunc(c.notFound))
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		panic(err)
	}
	fileServer := http.FileServerFS(assets)
	m.Handle("GET /console/assets/{file}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		name := r.PathValue("file")
		if _, err := fs.Stat(assets, name); err != nil || strings.ContainsAny(name, "/\\") {
			c.notFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + path.Clean(name)
		fileServer.ServeHTTP(w, r2)
	}))
}

// view is what a template renders.
type view struct {
	Page      Page
	Subject   string
	Namespace string
	Agent     string
	File      string
	Files     []string
	// Can lists the actions the subject may take here, space-separated,
	// for the script to enable controls (hints only: the API decides).
	Can string
}

func (c *Console) page(p Page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		s := authz.SubjectFrom(r.Context())
		if s == nil && !p.Public {
			http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
			return
		}
		v := view{Page: p, Files: workspace.Names[:]}
		if s != nil {
			v.Subject = s.ID
		}
		if ns := r.PathValue("ns"); ns != "" || strings.Contains(p.Pattern, "{ns}") {
			if !ids.Valid(ids.Namespace, ns) {
				c.notFound(w, r)
				return
			}
			v.Namespace = ns
		}
		if a := r.PathValue("agentId"); a != "" || strings.Contains(p.Pattern, "{agentId}") {
			if !ids.Valid(ids.Agent, a) {
				c.notFound(w, r)
				return
			}
			v.Agent = a
		}
		if strings.Contains(p.Pattern, "{name}") {
			v.File = r.PathValue("name")
			if !workspace.ValidName(v.File) {
				c.notFound(w, r)
				return
			}
		}
		if s != nil {
			v.Can = c.can(r.Context(), v)
		}
		c.render(w, r, http.StatusOK, p.Name, v)
	})
}

// can asks the authorization layer which actions the page's controls need.
func (c *Console) can(ctx context.Context, v view) string {
	type check struct {
		name   string
		action store.Action
		res    authz.Resource
	}
	checks := []check{{"administer", store.ActionAdminister, authz.Installation},
		{"create-namespace", store.ActionCreate, authz.Resource{Kind: store.KindNamespace}}}
	if v.Namespace != "" {
		checks = append(checks,
			check{"delete-namespace", store.ActionDelete, authz.NamespaceResource(v.Namespace)},
			check{"create-agent", store.ActionCreate, authz.Resource{Kind: store.KindAgent, NamespaceID: v.Namespace}},
			check{"create-configuration", store.ActionCreate, authz.Resource{Kind: store.KindConfiguration, NamespaceID: v.Namespace}})
	}
	if v.Agent != "" {
		res := authz.Resource{Kind: store.KindAgent, ID: v.Agent, NamespaceID: v.Namespace}
		checks = append(checks,
			check{"deploy", store.ActionDeploy, res},
			check{"operate", store.ActionOperate, res},
			check{"delete", store.ActionDelete, res})
	}
	var can []string
	for _, ch := range checks {
		if c.authz == nil {
			break
		}
		if d, err := c.authz.Decide(ctx, ch.action, ch.res); err == nil && d.Allowed {
			can = append(can, ch.name)
		}
	}
	return strings.Join(can, " ")
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	c.render(w, r, http.StatusNotFound, "not-found", view{Page: Page{Name: "not-found", Title: "Not found", Public: true}})
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, v); err != nil {
		httpx.Logger(r.Context()).Error("console: render page", "page", name, "error", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testutil"
)

const (
	testOrigin   = "http://occ.test"
	testPassword = "correct horse battery staple"
)

// newClock is a settable test clock, at testutil.Epoch.
func newClock() *testutil.Clock { return testutil.NewClock(time.Time{}) }

// env is one OCC server over a real store with a bootstrapped administrator.
type env struct {
	t     testing.TB
	srv   *server.Server
	clock *testutil.Clock
	admin cred
	store store.Store
	// transcript holds every response body and header, for leak searches.
	transcript bytes.Buffer
}

// cred is how a test request authenticates: a session cookie, an API key,
// both, or neither.
type cred struct {
	cookie *http.Cookie
	key    string
	name   string
}

// envelope is a decoded API reply.
type envelope struct {
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Path string `json:"path"`
			Code string `json:"code"`
		} `json:"details"`
	} `json:"error"`
	Meta struct {
		RequestID string `json:"requestId"`
	} `json:"meta"`
}

func newEnv(t testing.TB, st store.Store) *env {
	t.Helper()
	return newEnvWith(t, st, server.Options{})
}

// newEnvWith builds an env with extra server options (driver, worker).
func newEnvWith(t testing.TB, st store.Store, o server.Options) *env {
	t.Helper()
	c := newClock()
	o.Store, o.PublicOrigin = st, testOrigin
	if o.Now == nil {
		o.Now = c.Now
	}
	srv := server.New(o)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	created, err := srv.Service.Bootstrap(t.Context(), occ.BootstrapInput{AdminEmail: "admin@example.com", PasswordFile: pw, Out: &out})
	if err != nil || !created {
		t.Fatalf("Bootstrap: created=%v err=%v", created, err)
	}
	if out.Len() != 0 {
		t.Fatalf("Bootstrap with a password file printed %q; want nothing", out.String())
	}
	e := &env{t: t, srv: srv, clock: c, store: st}
	e.admin = e.signIn("admin@example.com", testPassword)
	return e
}

// do sends one request through the full handler stack. Mutations carry the
// public origin as a browser would.
func (e *env) do(method, path string, body any, c cred) (int, envelope, *httptest.ResponseRecorder) {
	e.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	var req *http.Request
	if rd != nil {
		req = httptest.NewRequest(method, path, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Origin", testOrigin)
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	if c.key != "" {
		req.Header.Set("X-Api-Key", c.key)
	}
	rec := httptest.NewRecorder()
	serve(e.t, e.srv.Handler(), rec, req)
	e.transcript.Write(rec.Body.Bytes())
	for k, v := range rec.Header() {
		fmt.Fprintf(&e.transcript, "%s: %v\n", k, v)
	}
	var env envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		e.t.Fatalf("%s %s: reply is not JSON: %v: %q", method, path, err, rec.Body.String())
	}
	return rec.Code, env, rec
}

// must sends a request that has to succeed with want and decodes its data.
func (e *env) must(method, path string, body any, c cred, want int, out any) {
	e.t.Helper()
	code, env, _ := e.do(method, path, body, c)
	if code != want {
		e.t.Fatalf("%s %s as %s: status %d, want %d; error %+v", method, path, c.name, code, want, env.Error)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			e.t.Fatalf("%s %s: decode data: %v", method, path, err)
		}
	}
}

func (e *env) signIn(email, password string) cred {
	e.t.Helper()
	_, _, rec := e.do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": password}, cred{})
	if rec.Code != http.StatusOK {
		e.t.Fatalf("sign in %s: status %d: %s", email, rec.Code, rec.Body.String())
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == "occ_session" {
			return cred{cookie: c, name: email}
		}
	}
	e.t.Fatalf("sign in %s: no session cookie", email)
	return cred{}
}

type idOnly struct {
	ID string `json:"id"`
}

// user creates a user, optionally bound to a role installation-wide, and
// signs it in.
func (e *env) user(email, roleID string) (string, cred) {
	e.t.Helper()
	var u idOnly
	e.must("POST", "/iam/users", map[string]string{"email": email, "password": testPassword}, e.admin, 201, &u)
	if roleID != "" {
		e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": u.ID, "roleId": roleID}, e.admin, 201, nil)
	}
	return u.ID, e.signIn(email, testPassword)
}

// principal creates a service principal, optionally bound to a role
// installation-wide, and issues it a key (limited to keyNamespace if set).
func (e *env) principal(name, roleID, keyNamespace string) (spID, keyID string, c cred) {
	e.t.Helper()
	var sp idOnly
	e.must("POST", "/iam/service-principals", map[string]string{"name": name}, e.admin, 201, &sp)
	if roleID != "" {
		e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": sp.ID, "roleId": roleID}, e.admin, 201, nil)
	}
	body := map[string]any{"servicePrincipalId": sp.ID, "name": name}
	if keyNamespace != "" {
		body["namespaceId"] = keyNamespace
	}
	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	e.must("POST", "/api/auth/service-keys", body, e.admin, 201, &k)
	if k.Key == "" {
		e.t.Fatal("service key response has no key")
	}
	return sp.ID, k.ID, cred{key: k.Key, name: name}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// httpTestServer serves h on a loopback port for tests that need a real
// client connection (disconnects).
func httpTestServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

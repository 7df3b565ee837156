package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
)

const (
	adminEmail    = "admin@example.com"
	adminPassword = "correct horse battery staple"
)

// occServer is a real OCC server (server.New over SQLite, bootstrapped) on
// a loopback port whose URL is its public origin, as a browser sees it.
type occServer struct {
	t      testing.TB
	URL    string
	srv    *server.Server
	client *http.Client

	mu        sync.Mutex
	intercept func(http.ResponseWriter, *http.Request) bool
}

// setIntercept makes f see every request first, until it is set again
// (nil: none). f answers true when it handled the request itself, false
// to pass it on to OCC: a test uses it to fail a request, or to hold one
// (a navigation held keeps the old page alive).
func (s *occServer) setIntercept(f func(http.ResponseWriter, *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.intercept = f
}

// newServer starts one; o.Store and o.PublicOrigin are filled in.
func newServer(t testing.TB, o server.Options) *occServer {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	hs.Start()
	t.Cleanup(hs.Close)
	if o.Store == nil {
		o.Store = testdb.SQLite(t)
	}
	o.PublicOrigin = hs.URL
	srv := server.New(o)
	s := &occServer{t: t, URL: hs.URL, srv: srv,
		client: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	h := srv.Handler()
	hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.intercept
		s.mu.Unlock()
		if f != nil && f(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(adminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if created, err := srv.Service.Bootstrap(context.Background(), occ.BootstrapInput{AdminEmail: adminEmail, PasswordFile: pw, Out: io.Discard}); err != nil || !created {
		t.Fatalf("Bootstrap: created=%v err=%v", created, err)
	}
	return s
}

// get fetches path with an optional session cookie, without following
// redirects.
func (s *occServer) get(path string, cookie *http.Cookie) *http.Response {
	s.t.Helper()
	req, err := http.NewRequest("GET", s.URL+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// api calls the API as a browser of the public origin would (Origin on
// every request) and decodes data into out; it returns the status and
// the error code.
func (s *occServer) api(method, path string, body any, cookie *http.Cookie, headers map[string]string, out any) (int, string) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Origin", s.URL)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil {
		s.t.Fatalf("%s %s: %d, reply not JSON: %v", method, path, res.StatusCode, err)
	}
	if env.Error != nil {
		return res.StatusCode, env.Error.Code
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			s.t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return res.StatusCode, ""
}

// signIn returns the session cookie of a user.
func (s *occServer) signIn(email, password string) *http.Cookie {
	s.t.Helper()
	b, _ := json.Marshal(map[string]string{"email": email, "password": password})
	req, _ := http.NewRequest("POST", s.URL+"/api/auth/sign-in/email", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", s.URL)
	res, err := s.client.Do(req)
	if err != nil || res.StatusCode != 200 {
		s.t.Fatalf("sign in %s: %v %v", email, res, err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "occ_session") {
			return c
		}
	}
	s.t.Fatalf("sign in %s: no session cookie", email)
	return nil
}

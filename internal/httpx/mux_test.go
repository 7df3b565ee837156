package httpx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
)

func testMux() *Mux {
	m := NewMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		Write(w, r, http.StatusOK, map[string]string{"pattern": r.Pattern, "ns": r.PathValue("ns")})
	}
	m.HandleFunc("GET /namespaces/{ns}", echo)
	m.HandleFunc("DELETE /namespaces/{ns}", echo)
	m.HandleFunc("POST /namespaces", echo)
	m.Handle("GET /health", http.HandlerFunc(echo))
	return m
}

func TestMux(t *testing.T) {
	type reply struct {
		Status int
		Allow  string
		Code   string // error code, or the matched pattern for 200
		NS     string
	}
	tests := []struct {
		method, target string
		want           reply
	}{
		{"GET", "/namespaces/ns_1", reply{Status: 200, Code: "GET /namespaces/{ns}", NS: "ns_1"}},
		{"DELETE", "/namespaces/ns_1", reply{Status: 200, Code: "DELETE /namespaces/{ns}", NS: "ns_1"}},
		{"POST", "/namespaces", reply{Status: 200, Code: "POST /namespaces"}},
		{"GET", "/health", reply{Status: 200, Code: "GET /health"}},
		{"PUT", "/namespaces/ns_1", reply{Status: 405, Allow: "DELETE, GET, HEAD", Code: "METHOD_NOT_ALLOWED"}},
		{"GET", "/namespaces", reply{Status: 405, Allow: "POST", Code: "METHOD_NOT_ALLOWED"}},
		{"OPTIONS", "/health", reply{Status: 405, Allow: "GET, HEAD", Code: "METHOD_NOT_ALLOWED"}},
		{"GET", "/nope", reply{Status: 404, Code: "NOT_FOUND"}},
		{"GET", "/", reply{Status: 404, Code: "NOT_FOUND"}},
		{"GET", "/namespaces/ns_1/agents", reply{Status: 404, Code: "NOT_FOUND"}},
		{"DELETE", "/nope", reply{Status: 404, Code: "NOT_FOUND"}},
		// Non-canonical paths: ServeMux would redirect; Mux answers 404.
		{"GET", "/namespaces/", reply{Status: 404, Code: "NOT_FOUND"}},
		{"GET", "//health", reply{Status: 404, Code: "NOT_FOUND"}},
		{"GET", "/x/../health", reply{Status: 404, Code: "NOT_FOUND"}},
	}
	m := testMux()
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			w := httptest.NewRecorder()
			m.ServeHTTP(w, httptest.NewRequest(tt.method, tt.target, nil))
			got := reply{Status: w.Code, Allow: w.Header().Get("Allow")}
			if w.Code == http.StatusOK {
				var body struct {
					Data struct {
						Pattern string `json:"pattern"`
						NS      string `json:"ns"`
					} `json:"data"`
					Meta wireMeta `json:"meta"`
				}
				decodeWire(t, w.Body.Bytes(), &body)
				got.Code, got.NS = body.Data.Pattern, body.Data.NS
			} else {
				var body wireError
				decodeWire(t, w.Body.Bytes(), &body)
				got.Code = body.Error.Code
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", tt.method, tt.target, diff)
			}
			id := w.Header().Get("X-Request-Id")
			if diff := cmp.Diff(wantAPIHeaders(id), apiHeaders(w.Header())); diff != "" {
				t.Errorf("%s %s headers (-want +got):\n%s", tt.method, tt.target, diff)
			}
		})
	}
}

func TestMuxHead(t *testing.T) {
	srv := httptest.NewServer(testMux())
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodHead, srv.URL+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("HEAD /health: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || len(body) != 0 || res.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Errorf("HEAD /health: status %d, %d body bytes, content type %q; want 200, none, JSON",
			res.StatusCode, len(body), res.Header.Get("Content-Type"))
	}
}

func TestMuxNilHandlerPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Mux.Handle with a nil handler did not panic")
		}
	}()
	NewMux().Handle("GET /x", nil)
}

// TestEveryReplyKind sends each kind of reply through the production stack
// over a real connection and checks the headers and envelope clients rely on.
func TestEveryReplyKind(t *testing.T) {
	m := NewMux()
	m.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		Write(w, r, http.StatusOK, "fine")
	})
	m.HandleFunc("GET /conflict", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, errkind.New(errkind.Conflict, "Busy."))
	})
	m.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, io.ErrUnexpectedEOF)
	})
	m.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		panic("boom")
	})
	m.HandleFunc("POST /body", func(w http.ResponseWriter, r *http.Request) {
		var in target
		if err := ReadJSON(w, r, &in, 64); err != nil {
			WriteError(w, r, err)
			return
		}
		Write(w, r, http.StatusCreated, in.Name)
	})
	log, _ := captureLogs()
	stack := RequestID(Recover(SecurityHeaders(m)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stack.ServeHTTP(w, r.WithContext(WithLogger(r.Context(), log)))
	}))
	defer srv.Close()

	tests := []struct {
		name, method, path, contentType, body string
		wantStatus                            int
		wantCode                              string
	}{
		{"success", "GET", "/ok", "", "", 200, ""},
		{"created", "POST", "/body", "application/json", `{"name":"n"}`, 201, ""},
		{"error", "GET", "/conflict", "", "", 409, "RESOURCE_CONFLICT"},
		{"internal", "GET", "/broken", "", "", 500, "INTERNAL_ERROR"},
		{"not found", "GET", "/missing", "", "", 404, "NOT_FOUND"},
		{"method not allowed", "DELETE", "/ok", "", "", 405, "METHOD_NOT_ALLOWED"},
		{"panic", "GET", "/panic", "", "", 500, "INTERNAL_ERROR"},
		{"invalid body", "POST", "/body", "application/json", `{"name":1}`, 400, "INVALID_REQUEST"},
		{"too large", "POST", "/body", "application/json", paddedBody(65), 413, "PAYLOAD_TOO_LARGE"},
		{"wrong media type", "POST", "/body", "text/plain", `{"name":"n"}`, 415, "UNSUPPORTED_MEDIA_TYPE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			req.Header.Set("X-Request-Id", "client-chosen")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("%s %s: reading body: %v", tt.method, tt.path, err)
			}
			id := res.Header.Get("X-Request-Id")
			if !requestIDPattern.MatchString(id) {
				t.Errorf("%s %s: X-Request-Id %q is not a generated ID", tt.method, tt.path, id)
			}
			if diff := cmp.Diff(wantAPIHeaders(id), apiHeaders(res.Header)); diff != "" {
				t.Errorf("%s %s headers (-want +got):\n%s", tt.method, tt.path, diff)
			}
			var metaID, code string
			if tt.wantCode == "" {
				var body struct {
					Data any      `json:"data"`
					Meta wireMeta `json:"meta"`
				}
				decodeWire(t, raw, &body)
				metaID = body.Meta.RequestID
			} else {
				var body wireError
				decodeWire(t, raw, &body)
				metaID, code = body.Meta.RequestID, body.Error.Code
			}
			if res.StatusCode != tt.wantStatus || code != tt.wantCode || metaID != id {
				t.Errorf("%s %s: status %d code %q meta.requestId %q; want %d %q %q",
					tt.method, tt.path, res.StatusCode, code, metaID, tt.wantStatus, tt.wantCode, id)
			}
		})
	}
}

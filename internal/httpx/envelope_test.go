package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
)

var requestIDPattern = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

// serve runs h behind RequestID with a captured logger and returns the
// recorded reply and the log output.
func serve(h http.HandlerFunc, r *http.Request) (*httptest.ResponseRecorder, string) {
	log, buf := captureLogs()
	w := httptest.NewRecorder()
	RequestID(h).ServeHTTP(w, r.WithContext(WithLogger(r.Context(), log)))
	return w, buf.String()
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		data     any
		wantBody string // with REQ for the request ID
	}{
		{"object", http.StatusOK, map[string]any{"name": "a"}, `{"data":{"name":"a"},"meta":{"requestId":"REQ"}}`},
		{"created", http.StatusCreated, []int{1, 2}, `{"data":[1,2],"meta":{"requestId":"REQ"}}`},
		{"nil data", http.StatusOK, nil, `{"data":null,"meta":{"requestId":"REQ"}}`},
		{"no HTML escaping", http.StatusOK, "<a href='x'>&</a>", `{"data":"<a href='x'>&</a>","meta":{"requestId":"REQ"}}`},
		// The wire types package wirejson encodes, through the pooled buffer
		// (twice each: a reused buffer must not carry bytes over).
		{"agent (wirejson)", http.StatusOK, wireAgent,
			`{"data":{"id":"agt_1","namespaceId":"ns_1","name":"a<b>","configurationId":"cfg_1","status":"active","desiredRuntimeState":"running","createdAt":"2026-12-03T11:00:00Z","updatedAt":"2026-12-03T11:00:00.5+05:30"},"meta":{"requestId":"REQ"}}`},
		{"agent page (wirejson)", http.StatusOK, apitypes.List[apitypes.Agent]{Items: []apitypes.Agent{}, NextCursor: "c"},
			`{"data":{"items":[],"nextCursor":"c"},"meta":{"requestId":"REQ"}}`},
		{"agent again (wirejson)", http.StatusCreated, wireAgent,
			`{"data":{"id":"agt_1","namespaceId":"ns_1","name":"a<b>","configurationId":"cfg_1","status":"active","desiredRuntimeState":"running","createdAt":"2026-12-03T11:00:00Z","updatedAt":"2026-12-03T11:00:00.5+05:30"},"meta":{"requestId":"REQ"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := serve(func(w http.ResponseWriter, r *http.Request) { Write(w, r, tt.status, tt.data) },
				httptest.NewRequest(http.MethodGet, "/x", nil))
			id := w.Header().Get("X-Request-Id")
			if !requestIDPattern.MatchString(id) {
				t.Fatalf("Write: X-Request-Id = %q, want req_ and 32 hex digits", id)
			}
			want := strings.ReplaceAll(tt.wantBody, "REQ", id) + "\n"
			if diff := cmp.Diff(want, w.Body.String()); diff != "" {
				t.Errorf("Write(%v) body (-want +got):\n%s", tt.data, diff)
			}
			if w.Code != tt.status {
				t.Errorf("Write: status %d, want %d", w.Code, tt.status)
			}
			if diff := cmp.Diff(wantAPIHeaders(id), apiHeaders(w.Header())); diff != "" {
				t.Errorf("Write headers (-want +got):\n%s", diff)
			}
			if got, want := w.Header().Get("Content-Length"), fmt.Sprint(len(want)); got != want {
				t.Errorf("Write: Content-Length %s, want %s", got, want)
			}
		})
	}
}

// wireAgent is an Agent, a type Write encodes with package wirejson.
var wireAgent = apitypes.Agent{ID: "agt_1", NamespaceID: "ns_1", Name: "a<b>", ConfigurationID: "cfg_1",
	Status: apitypes.AgentActive, DesiredRuntimeState: apitypes.RuntimeRunning,
	CreatedAt: time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC),
	UpdatedAt: time.Date(2026, 12, 3, 11, 0, 0, 5e8, time.FixedZone("", 5*3600+30*60))}

func TestWriteUnencodable(t *testing.T) {
	// The last: a wire type wirejson declines (a year past 9999) is still
	// refused, by encoding/json, as before.
	for _, data := range []any{make(chan int), math.NaN(), map[string]any{"f": func() {}},
		apitypes.Agent{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		t.Run(fmt.Sprintf("%T", data), func(t *testing.T) {
			w, logs := serve(func(w http.ResponseWriter, r *http.Request) { Write(w, r, http.StatusOK, data) },
				httptest.NewRequest(http.MethodGet, "/x", nil))
			var got wireError
			decodeWire(t, w.Body.Bytes(), &got)
			if w.Code != http.StatusInternalServerError || got.Error.Code != errkind.CodeInternal {
				t.Errorf("Write(%T): status %d code %q, want 500 INTERNAL_ERROR", data, w.Code, got.Error.Code)
			}
			if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "response could not be encoded") {
				t.Errorf("Write(%T): log %q lacks the encoding error", data, logs)
			}
		})
	}
}

func TestWriteWithoutRequestIDMiddleware(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, httptest.NewRequest(http.MethodGet, "/x", nil), http.StatusOK, 1)
	var got struct {
		Data int      `json:"data"`
		Meta wireMeta `json:"meta"`
	}
	decodeWire(t, w.Body.Bytes(), &got)
	id := w.Header().Get("X-Request-Id")
	if !requestIDPattern.MatchString(id) || got.Meta.RequestID != id {
		t.Errorf("Write without RequestID: header %q, meta %q; want the same generated ID", id, got.Meta.RequestID)
	}
}

// errorReply is the part of an error reply a test states.
type errorReply struct {
	Status  int
	Allow   string
	Code    string
	Message string
	Details []errkind.Detail
	Data    map[string]any
}

func TestWriteError(t *testing.T) {
	const internalMsg = "An internal error occurred; quote the request ID when reporting it."
	secret := errors.New("dial tcp 10.0.0.3:5432: password authentication failed for user occ")
	details := func(n int) []errkind.Detail {
		ds := make([]errkind.Detail, n)
		for i := range ds {
			ds[i] = detail(fmt.Sprintf("/f%d", i), errkind.DetailRequired)
		}
		return ds
	}
	withData := func(e *errkind.Error, data map[string]any) *errkind.Error { e.Data = data; return e }
	withDetails := func(e *errkind.Error, ds []errkind.Detail) *errkind.Error { e.Details = ds; return e }
	tests := []struct {
		name string
		err  error
		want errorReply
	}{
		{"invalid", errkind.New(errkind.Invalid, "Bad."), errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "Bad."}},
		{"unauthenticated", errkind.New(errkind.Unauthenticated, "Sign in."), errorReply{Status: 401, Code: "UNAUTHENTICATED", Message: "Sign in."}},
		{"permission denied", errkind.New(errkind.PermissionDenied, "No."), errorReply{Status: 403, Code: "FORBIDDEN", Message: "No."}},
		{"not found", errkind.New(errkind.NotFound, "The requested workspace file was not found."), errorReply{Status: 404, Code: "NOT_FOUND", Message: "The requested workspace file was not found."}},
		{"conflict", errkind.New(errkind.Conflict, "Busy."), errorReply{Status: 409, Code: "RESOURCE_CONFLICT", Message: "Busy."}},
		{"specific code", errkind.WithCode(errkind.Conflict, errkind.CodeAgentDeleting, "Deleting."), errorReply{Status: 409, Code: "AGENT_DELETING", Message: "Deleting."}},
		{"precondition with data", withData(errkind.New(errkind.PreconditionFailed, "Stale."), map[string]any{"currentHash": "abc"}),
			errorReply{Status: 412, Code: "PRECONDITION_FAILED", Message: "Stale.", Data: map[string]any{"currentHash": "abc"}}},
		{"too large", errkind.New(errkind.TooLarge, "Big."), errorReply{Status: 413, Code: "PAYLOAD_TOO_LARGE", Message: "Big."}},
		{"unsupported media", errkind.New(errkind.UnsupportedMedia, "JSON."), errorReply{Status: 415, Code: "UNSUPPORTED_MEDIA_TYPE", Message: "JSON."}},
		{"wrapped", fmt.Errorf("load agent: %w", errkind.New(errkind.NotFound, "Gone.")), errorReply{Status: 404, Code: "NOT_FOUND", Message: "Gone."}},
		{"empty message", &errkind.Error{Kind: errkind.NotFound}, errorReply{Status: 404, Code: "NOT_FOUND", Message: "Not Found."}},
		{"4xx cause stays private", errkind.Wrap(errkind.Invalid, "Bad input.", secret), errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "Bad input."}},
		{"405 allow from data", withData(errkind.New(errkind.MethodNotAllowed, "No."), map[string]any{"allow": "GET, HEAD"}),
			errorReply{Status: 405, Allow: "GET, HEAD", Code: "METHOD_NOT_ALLOWED", Message: "No."}},
		{"405 keeps other data", withData(errkind.New(errkind.MethodNotAllowed, "No."), map[string]any{"allow": "GET", "x": 1.0}),
			errorReply{Status: 405, Allow: "GET", Code: "METHOD_NOT_ALLOWED", Message: "No.", Data: map[string]any{"x": 1.0}}},
		{"unencodable data is dropped", withData(errkind.New(errkind.Conflict, "Busy."), map[string]any{"f": func() {}}),
			errorReply{Status: 409, Code: "RESOURCE_CONFLICT", Message: "Busy."}},

		// Messages: 256 characters (UTF-16 code units, as the reference
		// counts them) pass, longer ones are cut, never inside a character.
		{"message of 256 characters", errkind.New(errkind.Invalid, strings.Repeat("m", 256)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: strings.Repeat("m", 256)}},
		{"message of 257 characters", errkind.New(errkind.Invalid, strings.Repeat("m", 257)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: strings.Repeat("m", 256)}},
		{"message of 256 characters in 512 bytes", errkind.New(errkind.Invalid, strings.Repeat("é", 256)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: strings.Repeat("é", 256)}},
		{"message of 257 characters in 514 bytes", errkind.New(errkind.Invalid, strings.Repeat("é", 257)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: strings.Repeat("é", 256)}},
		{"message of 256 units in surrogate pairs", errkind.New(errkind.Invalid, strings.Repeat("😀", 128)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: strings.Repeat("😀", 128)}},
		{"message of 257 units: the pair that does not fit is left out", errkind.New(errkind.Invalid, "m"+strings.Repeat("😀", 128)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "m" + strings.Repeat("😀", 127)}},
		{"message with invalid UTF-8", errkind.New(errkind.Invalid, "a\xffb"),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "a\ufffdb"}},

		// Details: 32 pass, more are cut to 32; long pointers are cut.
		{"32 details", withDetails(errkind.New(errkind.Invalid, "Bad."), details(32)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "Bad.", Details: details(32)}},
		{"33 details", withDetails(errkind.New(errkind.Invalid, "Bad."), details(33)),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "Bad.", Details: details(32)}},
		{"long pointer", withDetails(errkind.New(errkind.Invalid, "Bad."), []errkind.Detail{detail("/"+strings.Repeat("k", 2000), "REQUIRED")}),
			errorReply{Status: 400, Code: "INVALID_REQUEST", Message: "Bad.", Details: []errkind.Detail{detail("/"+strings.Repeat("k", 1023), "REQUIRED")}}},

		// 5xx: fixed messages, nothing of the error's own text.
		{"unclassified", secret, errorReply{Status: 500, Code: "INTERNAL_ERROR", Message: internalMsg}},
		{"wrapped unclassified", fmt.Errorf("store: %w", secret), errorReply{Status: 500, Code: "INTERNAL_ERROR", Message: internalMsg}},
		{"nil", nil, errorReply{Status: 500, Code: "INTERNAL_ERROR", Message: internalMsg}},
		{"internal with message, details and data", withDetails(withData(errkind.Wrap(errkind.Internal, "insert agent 10.0.0.3", secret), map[string]any{"host": "10.0.0.3"}), details(1)),
			errorReply{Status: 500, Code: "INTERNAL_ERROR", Message: internalMsg}},
		{"unknown kind", &errkind.Error{Kind: errkind.Kind(99), Message: "x"}, errorReply{Status: 500, Code: "INTERNAL_ERROR", Message: internalMsg}},
		{"not implemented", errkind.New(errkind.NotImplemented, "driver ssh lacks Logs"),
			errorReply{Status: 501, Code: "NOT_IMPLEMENTED", Message: "This operation is not implemented."}},
		{"unavailable", errkind.Wrap(errkind.Unavailable, "gateway at 10.0.0.3 refused", secret),
			errorReply{Status: 503, Code: "DEPENDENCY_UNAVAILABLE", Message: "A service this request depends on is unavailable; try again later."}},
		{"unknown outcome keeps data", withData(errkind.Wrap(errkind.OutcomeUnknown, "ws closed", secret), map[string]any{"retry": false}),
			errorReply{Status: 503, Code: "UNKNOWN_OUTCOME", Message: "The outcome of this write is unknown: it may or may not have been applied. Read the resource before retrying.", Data: map[string]any{"retry": false}}},
		{"5xx with a custom code", errkind.WithCode(errkind.Unavailable, "GATEWAY_DOWN", "gateway 10.0.0.3 down"),
			errorReply{Status: 503, Code: "GATEWAY_DOWN", Message: "The server could not complete the request; quote the request ID when reporting it."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := serve(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, tt.err) },
				httptest.NewRequest(http.MethodPost, "/x", nil))
			var body wireError
			decodeWire(t, w.Body.Bytes(), &body)
			got := errorReply{
				Status: w.Code, Allow: w.Header().Get("Allow"),
				Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details, Data: body.Error.Data,
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WriteError(%v) (-want +got):\n%s", tt.err, diff)
			}
			id := w.Header().Get("X-Request-Id")
			if diff := cmp.Diff(wantAPIHeaders(id), apiHeaders(w.Header())); diff != "" {
				t.Errorf("WriteError headers (-want +got):\n%s", diff)
			}
			if body.Meta.RequestID != id || !requestIDPattern.MatchString(id) {
				t.Errorf("WriteError: meta.requestId %q, header %q; want the same request ID", body.Meta.RequestID, id)
			}
			for _, leak := range []string{"10.0.0.3", "password", "insert agent", "driver ssh"} {
				if strings.Contains(w.Body.String(), leak) {
					t.Errorf("WriteError(%v): body %s leaks %q", tt.err, w.Body, leak)
				}
			}
		})
	}
}

// logLine is the part of a JSON log record the tests check.
type logLine struct {
	Level     string `json:"level"`
	Msg       string `json:"msg"`
	RequestID string `json:"request_id"`
	Error     string `json:"error"`
	Status    int    `json:"status"`
}

func parseLogs(t *testing.T, logs string) []logLine {
	t.Helper()
	var lines []logLine
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l == "" {
			continue
		}
		var line logLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, line)
	}
	return lines
}

func TestWriteErrorLogs(t *testing.T) {
	secret := errors.New("password authentication failed")
	tests := []struct {
		name string
		err  error
		want []logLine // RequestID filled in from the reply
	}{
		{"unclassified logged at error with its text", fmt.Errorf("store: %w", secret),
			[]logLine{{Level: "ERROR", Msg: "request failed", Error: "store: password authentication failed", Status: 500}}},
		{"internal error logged at error", errkind.Wrap(errkind.Internal, "broken", secret),
			[]logLine{{Level: "ERROR", Msg: "request failed", Error: "INTERNAL_ERROR: broken: password authentication failed", Status: 500}}},
		{"nil error logged at error", nil,
			[]logLine{{Level: "ERROR", Msg: "request failed", Error: "WriteError called with a nil error", Status: 500}}},
		{"classified 503 logged at warn with its cause", errkind.Wrap(errkind.Unavailable, "gateway down", secret),
			[]logLine{{Level: "WARN", Msg: "request failed", Error: "DEPENDENCY_UNAVAILABLE: gateway down: password authentication failed", Status: 503}}},
		{"drain or hashing shed (503 with Retry-After) at warn", errkind.WithRetryAfter(errkind.Unavailable, "Shutting down.", time.Second),
			[]logLine{{Level: "WARN", Msg: "request failed", Error: "DEPENDENCY_UNAVAILABLE: Shutting down.", Status: 503}}},
		{"database unreachable at warn", fmt.Errorf("get agent: %w", errkind.Wrap(errkind.Unavailable, "database busy or unavailable", secret)),
			[]logLine{{Level: "WARN", Msg: "request failed", Error: "get agent: DEPENDENCY_UNAVAILABLE: database busy or unavailable: password authentication failed", Status: 503}}},
		{"unknown outcome at warn", errkind.New(errkind.OutcomeUnknown, "Lost."),
			[]logLine{{Level: "WARN", Msg: "request failed", Error: "UNKNOWN_OUTCOME: Lost.", Status: 503}}},
		{"not implemented at warn", errkind.New(errkind.NotImplemented, "No."),
			[]logLine{{Level: "WARN", Msg: "request failed", Error: "NOT_IMPLEMENTED: No.", Status: 501}}},
		{"4xx with a cause logged at debug", errkind.Wrap(errkind.Invalid, "Bad.", secret),
			[]logLine{{Level: "DEBUG", Msg: "request rejected", Error: "INVALID_REQUEST: Bad.: password authentication failed", Status: 400}}},
		{"4xx without a cause not logged", errkind.New(errkind.NotFound, "Gone."), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, logs := serve(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, tt.err) },
				httptest.NewRequest(http.MethodGet, "/x", nil))
			id := w.Header().Get("X-Request-Id")
			var want []logLine
			for _, l := range tt.want {
				l.RequestID = id
				want = append(want, l)
			}
			if diff := cmp.Diff(want, parseLogs(t, logs)); diff != "" {
				t.Errorf("WriteError(%v) logs (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

// TestWriteErrorClientGone: a failure that is the request's own
// cancellation (the client disconnected) is logged at info and answered
// 499, so it is neither a 500 nor an error line; a deadline, or a
// cancellation the client did not cause, keeps its mapping.
func TestWriteErrorClientGone(t *testing.T) {
	canceled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	expired := func() context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		t.Cleanup(cancel)
		return ctx
	}
	type result struct {
		Status int // of the reply
		Level  string
		Msg    string
		Logged int // the status the log line names
		Body   bool
	}
	tests := []struct {
		name string
		ctx  func() context.Context // the request's context
		err  error
		want result
	}{
		{"client canceled", canceled, fmt.Errorf("sqlstore: get agent: %w", context.Canceled),
			result{Status: 499, Level: "INFO", Msg: "client disconnected", Logged: 499}},
		{"client canceled during a classified 503", canceled, errkind.Wrap(errkind.OutcomeUnknown, "Lost.", context.Canceled),
			result{Status: 499, Level: "INFO", Msg: "client disconnected", Logged: 499}},
		{"server deadline exceeded", context.Background, fmt.Errorf("sqlstore: get agent: %w", context.DeadlineExceeded),
			result{Status: 500, Level: "ERROR", Msg: "request failed", Logged: 500, Body: true}},
		{"request deadline exceeded", expired, fmt.Errorf("sqlstore: get agent: %w", context.DeadlineExceeded),
			result{Status: 500, Level: "ERROR", Msg: "request failed", Logged: 500, Body: true}},
		{"canceled by the server, client connected", context.Background, fmt.Errorf("worker stopped: %w", context.Canceled),
			result{Status: 500, Level: "ERROR", Msg: "request failed", Logged: 500, Body: true}},
		{"client gone, unrelated failure", canceled, errors.New("broken"),
			result{Status: 500, Level: "ERROR", Msg: "request failed", Logged: 500, Body: true}},
		{"plain internal error", context.Background, errors.New("broken"),
			result{Status: 500, Level: "ERROR", Msg: "request failed", Logged: 500, Body: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(tt.ctx())
			w, logs := serve(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, tt.err) }, r)
			lines := parseLogs(t, logs)
			if len(lines) != 1 {
				t.Fatalf("WriteError(%v) logged %d lines, want 1:\n%s", tt.err, len(lines), logs)
			}
			got := result{Status: w.Code, Level: lines[0].Level, Msg: lines[0].Msg, Logged: lines[0].Status, Body: w.Body.Len() > 0}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WriteError(%v) (-want +got):\n%s", tt.err, diff)
			}
			if id := w.Header().Get("X-Request-Id"); lines[0].RequestID != id || id == "" {
				t.Errorf("log request_id %q, reply X-Request-Id %q", lines[0].RequestID, id)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd"},
		// n counts UTF-16 code units: € is 3 bytes and 1 unit, 😀 4 bytes
		// and 2 units.
		{"ab€", 3, "ab€"},
		{"ab€", 2, "ab"},
		{"😀😀", 5, "😀😀"},
		{"😀😀", 3, "😀"}, // the second would need units 4 and 5
		{"a😀", 2, "a"}, // a pair is never split
		{"😀a", 2, "😀"},
		{"\xff\xff", 4, "\ufffd"},
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

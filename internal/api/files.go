package api

import (
	"net/http"
	"strings"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/ids"
)

// PutFileLimit is the workspace file PUT body limit: a 16 KiB document can
// grow with JSON escaping.
const PutFileLimit = 48 << 10

func etag(hash string) string { return `"` + hash + `"` }

// GetWorkspaceFile answers {name, content} with an ETag of the content's
// SHA-256, for compare-and-swap writes.
func (a *API) GetWorkspaceFile(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok || !bodyless(w, r) {
		return
	}
	f, err := a.svc.GetWorkspaceFile(r.Context(), p[0], p[1], r.PathValue("name"))
	if err == nil {
		w.Header().Set("ETag", etag(f.Hash))
	}
	respond(w, r, http.StatusOK, toWorkspaceFile(f), err)
}

// PutWorkspaceFile writes {content}; with If-Match it is a compare-and-swap.
func (a *API) PutWorkspaceFile(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok {
		return
	}
	expected, err := ifMatch(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if err := httpx.NoQuery(r); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var in apitypes.PutWorkspaceFileRequest
	if err := httpx.ReadJSON(w, r, &in, PutFileLimit); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	f, err := a.svc.PutWorkspaceFile(r.Context(), p[0], p[1], r.PathValue("name"), in.Content, expected)
	if err == nil {
		w.Header().Set("ETag", etag(f.Hash))
	}
	respond(w, r, http.StatusOK, toWrittenFile(f), err)
}

// ifMatch reads an optional strong entity tag naming a SHA-256: the hash a
// client read. Weak tags, lists and "*" are refused: the native
// compare-and-swap compares one exact hash.
func ifMatch(r *http.Request) (string, error) {
	vals := r.Header.Values("If-Match")
	if len(vals) == 0 {
		return "", nil
	}
	v := strings.ToLower(strings.TrimSpace(vals[0]))
	hash, opened := strings.CutPrefix(v, `"`)
	hash, closed := strings.CutSuffix(hash, `"`)
	if len(vals) != 1 || !opened || !closed || !digest.Valid(hash) {
		return "", errkind.InvalidDetails(`If-Match must be one strong ETag: "<sha256 hex>" as returned by GET.`,
			errkind.Detail{Path: "/header/If-Match", Code: errkind.DetailInvalidFormat})
	}
	return hash, nil
}

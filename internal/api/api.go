// Package api owns OCC's HTTP handlers. Each handler has the same thin
// shape: decode and validate the request into its wire type (package
// apitypes) with httpx, call one domain function of package occ (which
// goes through the authorizing store), map any error once with
// httpx.WriteError, convert the result to its wire type and write the
// envelope. convert.go is the only file that names store types; handlers
// can only write apitypes values, so no storage record is serialized to a
// client. There is no SQL and no business rule here; routes and their auth
// levels are listed in package server.
package api

import (
	"net/http"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/occ"
)

// API holds what the handlers need.
type API struct {
	svc      *occ.Service
	sessions *authn.Sessions
}

// New returns the handler set.
func New(svc *occ.Service, sessions *authn.Sessions) *API {
	return &API{svc: svc, sessions: sessions}
}

// respond writes data with status, or the error. It is the only caller of
// httpx.Write in this package, and data is a wire type: values of package
// apitypes are all that handlers can send (see convert.go).
func respond(w http.ResponseWriter, r *http.Request, status int, data apitypes.Data, err error) {
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.Write(w, r, status, data)
}

// bodyless checks a request that must carry neither a body nor a query.
func bodyless(w http.ResponseWriter, r *http.Request) bool {
	if err := httpx.NoQuery(r); err != nil {
		httpx.WriteError(w, r, err)
		return false
	}
	if err := httpx.NoBody(r); err != nil {
		httpx.WriteError(w, r, err)
		return false
	}
	return true
}

// decode reads a strict JSON body with the default limit; no query allowed.
func decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	if err := httpx.NoQuery(r); err != nil {
		httpx.WriteError(w, r, err)
		return false
	}
	if err := httpx.ReadJSON(w, r, dst, httpx.DefaultLimit); err != nil {
		httpx.WriteError(w, r, err)
		return false
	}
	return true
}

// pathIDs validates path parameters (name, prefix pairs) in order.
func pathIDs(w http.ResponseWriter, r *http.Request, pairs ...string) ([]string, bool) {
	out := make([]string, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		v, err := httpx.PathID(r, pairs[i], pairs[i+1])
		if err != nil {
			httpx.WriteError(w, r, err)
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

package api

import (
	"net/http"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
)

// SignIn exchanges email and password for a session cookie. A request
// carrying an API key is refused: keys cannot create sessions.
func (a *API) SignIn(w http.ResponseWriter, r *http.Request) {
	if authz.SubjectFrom(r.Context()) != nil && authz.SubjectFrom(r.Context()).Kind == authz.KindServicePrincipal {
		httpx401(w, r)
		return
	}
	var in apitypes.SignInRequest
	if !decode(w, r, &in) {
		return
	}
	cookie, user, err := a.sessions.SignIn(r.Context(), in.Email, in.Password)
	if err != nil {
		respond(w, r, 0, nil, err)
		return
	}
	a.sessions.Rotate(r.Context(), r)
	http.SetCookie(w, cookie)
	u := toUser(user)
	respond(w, r, http.StatusOK, apitypes.Session{
		Subject: apitypes.Subject{ID: user.ID, Kind: authz.KindUser, Credential: "session"},
		User:    &u,
	}, nil)
}

func httpx401(w http.ResponseWriter, r *http.Request) {
	respond(w, r, 0, nil, errkind.New(errkind.Unauthenticated, "API keys cannot create sessions."))
}

// SignOut ends the caller's session.
func (a *API) SignOut(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	s := authz.SubjectFrom(r.Context())
	if s == nil || s.Credential != "session" {
		respond(w, r, 0, nil, errkind.New(errkind.Unauthenticated, "There is no session to sign out of."))
		return
	}
	cookie, err := a.sessions.SignOut(r.Context(), r)
	if err != nil {
		respond(w, r, 0, nil, err)
		return
	}
	http.SetCookie(w, cookie)
	respond(w, r, http.StatusOK, apitypes.SignedOut{SignedOut: true}, nil)
}

// Session describes the caller.
func (a *API) Session(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	s := authz.SubjectFrom(r.Context())
	out := apitypes.Session{Subject: apitypes.Subject{ID: s.ID, Kind: s.Kind, NamespaceID: s.NamespaceID, Credential: s.Credential}}
	if s.Kind == authz.KindUser {
		u, err := a.svc.CurrentUser(r.Context())
		if err != nil {
			respond(w, r, 0, nil, err)
			return
		}
		wu := toUser(u)
		out.User = &wu
	}
	respond(w, r, http.StatusOK, out, nil)
}

// CreateServiceKey issues a key; the key is in the response once.
func (a *API) CreateServiceKey(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateServiceKeyRequest
	if !decode(w, r, &in) {
		return
	}
	if !validRef(w, r, "/servicePrincipalId", in.ServicePrincipalID, ids.ServicePrincipal) ||
		(in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace)) {
		return
	}
	k, err := a.svc.IssueServiceKey(r.Context(), occ.ServiceKeyInput{
		ServicePrincipalID: in.ServicePrincipalID, NamespaceID: in.NamespaceID, Name: in.Name, ExpiresIn: in.ExpiresIn,
	})
	respond(w, r, http.StatusCreated, toServiceKey(k), err)
}

// RevokeServiceKey revokes a key.
func (a *API) RevokeServiceKey(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "keyId", ids.APIKey)
	if !ok || !bodyless(w, r) {
		return
	}
	_, err := a.svc.RevokeServiceKey(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.RevokedServiceKey{ID: p[0], Revoked: true}, err)
}

// validRef checks an id field of a body.
func validRef(w http.ResponseWriter, r *http.Request, path, v, prefix string) bool {
	if ids.Valid(prefix, v) {
		return true
	}
	respond(w, r, 0, nil, errkind.InvalidDetails("The id is malformed.", errkind.Detail{Path: path, Code: errkind.DetailInvalidFormat}))
	return false
}

// ListSessions lists the caller's live sessions.
func (a *API) ListSessions(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.MySessions(r.Context(), a.sessions.IdleEnd)
	current := authz.SubjectFrom(r.Context()).SessionID
	respond(w, r, http.StatusOK, toSessionInfos(v, a.sessions.IdleEnd, current), err)
}

// RevokeSession ends one of the caller's sessions.
func (a *API) RevokeSession(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "sessionId", ids.Session)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.RevokeMySession(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.RevokedSession{ID: p[0], Revoked: true}, err)
}

// RevokeUserCredentials ends a user's sessions and revokes the keys the
// user issued.
func (a *API) RevokeUserCredentials(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "userId", ids.User)
	if !ok || !bodyless(w, r) {
		return
	}
	sessions, keys, err := a.svc.RevokeUserCredentials(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.RevokedCredentials{UserID: p[0], SessionsRevoked: sessions, KeysRevoked: keys}, err)
}

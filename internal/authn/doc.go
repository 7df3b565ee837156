// Package authn owns OCC's credentials and turns a request into an
// authz.Subject. It holds three things:
//
//   - Passwords: argon2id hashes in the PHC string format (password.go).
//   - Browser sessions: a random token in a cookie, only its SHA-256 stored
//     (sessions.go).
//   - Service API keys: "occk_<key uuid hex>_<secret>", only the SHA-256 of
//     the secret stored (apikey.go).
//
// Authenticator (authenticator.go) is the one place that reads credentials
// off a request. It decides who the caller is, never what the caller may do:
// that is package authz. Every store call this package makes runs under the
// system subject SystemSubjectID, because at that point the caller is not
// yet known.
//
// Failure semantics: a bad credential is errkind.Unauthenticated with a
// fixed, generic message that never contains the credential, the email or
// the reason (expired, revoked, unknown...), so that responses do not help
// an attacker enumerate accounts or keys. A failing store is not a bad
// credential: it surfaces as an internal (or unavailable) error.
package authn

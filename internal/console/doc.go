// Package console owns the web Console that "occ server" serves at / and
// under /console/: the page table (Pages), the server-rendered html/template
// pages and the static assets (one style sheet, one script of our own, no
// third-party code), all embedded in the binary with go:embed, and the
// browser security policy of those responses (SecurityHeaders).
//
// The Console holds no data access of its own. A page is a server-rendered
// shell: its path values, the signed-in subject's id and hints of what the
// subject may do (from authz.Store.Decide, the authorization layer, which
// has no side effects and audits nothing). Everything the page shows or
// changes goes through the public HTTP API from the browser (fetch with the
// session cookie), so the API's admission (Origin and Sec-Fetch-Site rules),
// authorization and audit apply to every read and write exactly as for any
// other client. The permission hints only disable controls; the API decides.
//
// Pages are registered on the server's mux behind the same admission as the
// API. A page requested without a signed-in caller redirects (303) to the
// sign-in page. A malformed id in a page path answers a 404 page. File
// contents never appear in a page URL, the page HTML or the logs: the
// script reads them from the API into the editor and nowhere else (no
// browser storage).
package console

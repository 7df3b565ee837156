package apitypes

// Data is implemented by every type a route answers in the data member of
// the success envelope. Its method is unexported, so only types of this
// package implement it: the handlers' writer accepts nothing else, which
// keeps storage records off the wire by construction.
type Data interface {
	isData()
}

// Meta is the metadata member of every reply, success or error.
type Meta struct {
	// RequestID identifies the request in OCC's logs ("req_…"); quote it
	// when reporting a problem. It is also sent as the X-Request-Id header.
	RequestID string `json:"requestId"`
}

// Envelope is the body of every successful reply: {"data": …, "meta": …}.
type Envelope[T any] struct {
	// Data is the route's result.
	Data T `json:"data"`
	// Meta carries the request ID.
	Meta Meta `json:"meta"`
}

// ErrorEnvelope is the body of every failed reply: {"error": …, "meta": …}.
type ErrorEnvelope struct {
	// Error says what went wrong.
	Error Error `json:"error"`
	// Meta carries the request ID.
	Meta Meta `json:"meta"`
}

// Error describes a failed request. The HTTP status and Code together say
// what happened; Message is for people and never carries internal error
// text, secrets or file content.
type Error struct {
	// Code is the stable public error code, for example "INVALID_REQUEST",
	// "NOT_FOUND" or "UNKNOWN_OUTCOME" (docs/api.md lists them all).
	Code string `json:"code"`
	// Message is a human-readable explanation, at most 256 characters
	// (UTF-16 code units). A 5xx
	// reply carries a fixed message per code.
	Message string `json:"message"`
	// Details point at the offending parts of the request (at most 32);
	// absent when there are none.
	Details []ErrorDetail `json:"details,omitempty"`
	// Data holds machine-readable facts about some errors; absent when
	// there are none.
	Data map[string]any `json:"data,omitempty"`
}

// ErrorDetail names one offending part of a request.
type ErrorDetail struct {
	// Path is a JSON pointer (RFC 6901) into the body, or /path/<name>
	// for a path parameter, /query/<name> for a query parameter and
	// /header/<name> for a header.
	Path string `json:"path"`
	// Code says what is wrong there: REQUIRED, UNKNOWN_FIELD,
	// INVALID_TYPE, INVALID_FORMAT, INVALID_VALUE, TOO_LONG or TOO_DEEP.
	Code string `json:"code"`
}

// List is the data of a collection route: {"items": […]}. Items is never
// null; an empty collection is []. The paged lists (GET /namespaces, GET
// /namespaces/{ns}/agents, GET /namespaces/{ns}/configurations) also carry
// nextCursor while more pages follow.
type List[T Data] struct {
	// Items are the collection's members the caller may read. On a paged
	// list, the members of this page the caller may read: a page may hold
	// fewer than the limit, even none, and still have a next page.
	Items []T `json:"items"`
	// NextCursor, passed as the cursor query parameter, fetches the next
	// page of a paged list; absent on the last page and on lists that are
	// not paged. It is opaque.
	NextCursor string `json:"nextCursor,omitempty"`
}

// ListQuery holds the query parameters of a paged list route (GET
// /namespaces, GET /namespaces/{ns}/agents, GET
// /namespaces/{ns}/configurations); each field's JSON name is its
// parameter name. Empty fields are not sent.
type ListQuery struct {
	// Limit is the page size, 1 to 500; the default is 100.
	Limit int `json:"limit,omitempty"`
	// Cursor is a previous page's NextCursor; absent for the first page.
	Cursor string `json:"cursor,omitempty"`
}

func (List[T]) isData() {}

// Deleted is the data of a delete route that removes the resource at once.
// Its members are in this order (deleted, then id) on the wire.
type Deleted struct {
	// Deleted is always true.
	Deleted bool `json:"deleted"`
	// ID is the removed resource's ID.
	ID string `json:"id"`
}

func (Deleted) isData() {}

// Health is the data of the probe routes GET /healthz and GET /readyz.
type Health struct {
	// Status is "ok" for liveness and "ready" for readiness.
	Status string `json:"status"`
}

func (Health) isData() {}

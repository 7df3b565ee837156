// Package httpx owns the whole HTTP response vocabulary of OCC's API: the
// one JSON writer, the one error mapper, the one strict request-body reader,
// and the middleware that gives every request an ID, a logger and a JSON
// reply even when it panics or matches no route. Handlers elsewhere never
// set content types, pick status codes for errors or call encoding/json on
// a request body themselves; they look like this:
//
//	var in createReq
//	if err := httpx.ReadJSON(w, r, &in, httpx.DefaultLimit); err != nil {
//		httpx.WriteError(w, r, err)
//		return
//	}
//	...
//	httpx.Write(w, r, http.StatusCreated, out)
//
// # Envelope
//
// Success: {"data": ..., "meta": {"requestId": "req_..."}}.
// Failure: {"error": {"code", "message", "details"?, "data"?}, "meta": {"requestId"}}.
// Both are written as the public wire types apitypes.Envelope and
// apitypes.ErrorEnvelope, so clients decode exactly what is sent.
// Every reply written here carries Cache-Control: no-store, Content-Type:
// application/json; charset=utf-8, X-Content-Type-Options: nosniff and
// X-Request-Id. JSON is written without HTML escaping: the API is not HTML
// and nosniff stops browsers from treating it as such.
//
// # Errors
//
// WriteError is the single place that turns an error into a status and a
// body. It finds the *errkind.Error in the chain; anything else is an
// internal error. The causes of 5xx replies are logged with the request's
// logger and never sent: a 5xx body carries a fixed message per code and the
// request ID to quote. 4xx messages are the error's own public message,
// capped at errkind.MaxMessage characters (UTF-16 code units), with at most errkind.MaxDetails field
// details. A failure that is the request's own cancellation (the client
// disconnected) is logged at info and answered 499, nginx's "client closed
// request", which nobody reads but the metrics record.
//
// # Request bodies
//
// ReadJSON is strict because the handlers behind it trust what it returns:
// only application/json, a byte limit enforced before and while reading,
// no duplicate keys, no keys that are dangerous to JavaScript consumers
// (__proto__, constructor, prototype), nesting at most MaxDepth levels, no
// text that Go's decoder would silently alter (invalid UTF-8, unpaired
// UTF-16 surrogate escapes), no unknown fields, no missing required fields
// and no wrong types. Field problems are reported as JSON pointers
// (RFC 6901) in document order.
//
// # Routing
//
// Mux wraps http.ServeMux so that "no route" and "wrong method" are JSON
// envelopes (404 and 405 with Allow) like every other reply.
package httpx

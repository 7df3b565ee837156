// Package apitypes owns OCC's wire format: the request and response bodies
// of every HTTP API route, with their JSON names and meanings, and the
// {data, meta} and {error, meta} envelopes around them.
//
// It is the one public package of the module outside cmd/, on purpose:
// programs that talk to OCC import it to speak the API, and they cannot
// import anything under internal/. So it imports no OCC package and nothing
// beyond the standard library's encoding/json and time: depending on it
// costs a client nothing else.
//
// The server never serializes its storage records. Handlers in
// internal/api convert store and domain values into these types in one
// file (internal/api/convert.go) and can only write values of type Data,
// which no type outside this package implements. Field names, order and
// omitempty rules here are the API contract: changing one changes what
// every client reads.
//
// Times are RFC 3339 strings with fractional seconds when present.
// Identifiers are a kind prefix and a lowercase UUIDv4 (ns_, cfg_, agt_,
// rev_, sa_, key_, role_, bnd_, rst_, usr_, aud_).
package apitypes

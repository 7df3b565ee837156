// Package nativeconfig owns the mechanics every Compute driver shares when
// it turns a revision's native OpenClaw configuration document into the
// runtime's configuration: exact decoding (numbers pass through unchanged,
// one JSON object and nothing after it), reading nested objects where any
// other type is a configuration conflict, and creating the objects a
// driver fills in. What each driver enforces or renders stays in the
// driver.
//
// Failure semantics: every error here is a compute.Permanent
// CONFIGURATION_INVALID error: retrying cannot fix a document.
package nativeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/openclaw/occ/internal/compute"
)

// Invalid returns a permanent CONFIGURATION_INVALID error. Messages name
// keys, never values: a document can hold secrets.
func Invalid(format string, args ...any) error {
	return compute.Permanent(compute.CodeConfigurationInvalid, fmt.Errorf(format, args...))
}

// Decode reads exactly one JSON object, keeping numbers as json.Number so
// they are re-encoded exactly as written.
func Decode(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, Invalid("the configuration is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, Invalid("the configuration is not a JSON object: trailing data after the object")
	}
	if doc == nil {
		return nil, Invalid("the configuration is not a JSON object: null")
	}
	return doc, nil
}

// Object returns obj[key] as an object: absent is an empty object, any
// other type is a conflict reported under the dotted name.
func Object(obj map[string]any, key, name string) (map[string]any, error) {
	v, ok := obj[key]
	if !ok {
		return map[string]any{}, nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return nil, Invalid("%s must be an object", name)
	}
	return m, nil
}

// Child returns obj[key] as an object, creating it when absent. Callers
// check with Object first; a non-object value here is replaced.
func Child(obj map[string]any, key string) map[string]any {
	if m, ok := obj[key].(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	obj[key] = m
	return m
}

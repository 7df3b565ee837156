// Package testutil owns the small pieces every test package needs the same
// way: a context bounded by the test's own deadline (Context), polling for a
// condition with one interval and one failure message (Eventually, Poll),
// and a settable clock for code that takes a time source (Clock).
//
// It is imported by tests only; nothing in it starts processes or touches
// the network.
package testutil

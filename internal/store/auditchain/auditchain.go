// Package auditchain owns the tamper-evident form of the audit log: the
// canonical byte form of an event that is hashed, the link from each event
// to the one committed before it, and the check of a whole chain.
//
// Every event appended since schema migration 00004 carries a sequence
// number (1, 2, 3, ... per installation, in commit order), the hash of the
// event before it (PrevHash; Genesis for the first) and its own hash:
//
//	Hash = lowercase hex of SHA-256(Canonical(event, Seq, PrevHash))
//
// so changing, removing or reordering any committed event breaks every
// link after it. The store computes the link inside the appending
// transaction while holding the chain head (see sqlstore); this package has
// no database code, so the canonical form can be re-implemented by a SIEM
// from docs/reliability.md alone.
package auditchain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/openclaw/occ/internal/store"
)

// Genesis is the PrevHash of the first event of a chain: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// version opens every canonical form, so that a future form cannot be
// confused with this one.
const version = "occ-audit-chain-v1"

// TimeLayout is the form of OccurredAt in the canonical form: UTC, always
// six fractional digits (the stores keep microseconds).
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// Link is an event's place in the chain.
type Link struct {
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prevHash"`
	Hash     string `json:"hash"`
}

// Entry is an event as read back for verification or export. Link is nil
// for an event written before the chain existed (before migration 00004).
type Entry struct {
	Event store.AuditEvent
	Link  *Link
}

// Canonical returns the bytes that are hashed for event e at position seq
// after prevHash. Each field is a netstring (decimal byte length, ':', the
// bytes, ','), in this order: the version string, seq in decimal, prevHash,
// id, occurredAt (TimeLayout), kind, actorId, credential, requestId,
// action, namespaceId, resourceKind, resourceId, outcome, reasonCode,
// attemptId, the number of details in decimal, then each detail's key and
// value, keys in byte order. An absent optional field is the empty string.
func Canonical(e store.AuditEvent, seq int64, prevHash string) []byte {
	var b []byte
	ns := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
		b = append(b, ',')
	}
	ns(version)
	ns(strconv.FormatInt(seq, 10))
	ns(prevHash)
	ns(e.ID)
	ns(e.OccurredAt.UTC().Truncate(time.Microsecond).Format(TimeLayout))
	ns(e.Kind)
	ns(e.ActorID)
	ns(e.Credential)
	ns(e.RequestID)
	ns(e.Action)
	ns(e.Resource.NamespaceID)
	ns(string(e.Resource.Kind))
	ns(e.Resource.ID)
	ns(e.Outcome)
	ns(e.ReasonCode)
	ns(e.AttemptID)
	keys := make([]string, 0, len(e.Details))
	for k := range e.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ns(strconv.Itoa(len(keys)))
	for _, k := range keys {
		ns(k)
		ns(e.Details[k])
	}
	return b
}

// Hash returns the hash of event e at position seq after prevHash.
func Hash(e store.AuditEvent, seq int64, prevHash string) string {
	sum := sha256.Sum256(Canonical(e, seq, prevHash))
	return hex.EncodeToString(sum[:])
}

// Next returns the link of the event appended after head (Seq 0 and
// Genesis for an empty chain).
func Next(e store.AuditEvent, headSeq int64, headHash string) Link {
	seq := headSeq + 1
	return Link{Seq: seq, PrevHash: headHash, Hash: Hash(e, seq, headHash)}
}

// Break is the first broken link of a chain: the event at which the chain
// stops proving anything, and why.
type Break struct {
	Seq     int64  // the sequence number expected at that point
	EventID string // the event found there; empty when it is missing
	Reason  string
}

func (b *Break) Error() string {
	if b.EventID == "" {
		return fmt.Sprintf("audit chain broken at seq %d: %s", b.Seq, b.Reason)
	}
	return fmt.Sprintf("audit chain broken at seq %d (event %s): %s", b.Seq, b.EventID, b.Reason)
}

// Verifier checks a chain fed to it in sequence order, one entry at a time,
// so a chain of any length is checked in constant memory.
type Verifier struct {
	seq      int64
	hash     string
	unlinked int64
	broken   *Break
}

// NewVerifier starts a check at the genesis of a chain.
func NewVerifier() *Verifier { return &Verifier{hash: Genesis} }

// Add checks the next entry. Entries without a link (written before the
// chain existed) must all come first; they are counted, not checked. After
// the first break Add does nothing and returns that break.
func (v *Verifier) Add(en Entry) *Break {
	if v.broken != nil {
		return v.broken
	}
	want := v.seq + 1
	switch {
	case en.Link == nil && v.seq == 0:
		v.unlinked++
		return nil
	case en.Link == nil:
		v.broken = &Break{Seq: want, EventID: en.Event.ID, Reason: "the event has no chain link but follows chained events"}
	case en.Link.Seq != want:
		v.broken = &Break{Seq: want, Reason: fmt.Sprintf("the event is missing (the next one found is seq %d, event %s)", en.Link.Seq, en.Event.ID)}
	case en.Link.PrevHash != v.hash:
		v.broken = &Break{Seq: want, EventID: en.Event.ID, Reason: "its previous-hash does not match the hash of the event before it"}
	case Hash(en.Event, en.Link.Seq, en.Link.PrevHash) != en.Link.Hash:
		v.broken = &Break{Seq: want, EventID: en.Event.ID, Reason: "its contents do not match its hash (the event was altered)"}
	default:
		v.seq, v.hash = en.Link.Seq, en.Link.Hash
		return nil
	}
	return v.broken
}

// Finish checks the end of the chain against the stored head (the sequence
// number and hash of the last append): a chain whose tail was removed ends
// before the head. It returns the first break, or nil.
func (v *Verifier) Finish(headSeq int64, headHash string) *Break {
	if v.broken != nil {
		return v.broken
	}
	switch {
	case headSeq > v.seq:
		v.broken = &Break{Seq: v.seq + 1, Reason: fmt.Sprintf("the chain ends at seq %d but its head says %d events were appended", v.seq, headSeq)}
	case headSeq < v.seq || headHash != v.hash:
		v.broken = &Break{Seq: v.seq, Reason: "the chain head does not match the last event"}
	}
	return v.broken
}

// Result is what a complete check found.
type Result struct {
	Chained  int64  // events checked in the chain
	Unlinked int64  // events older than the chain, not checked
	LastHash string // the hash of the last chained event (Genesis if none)
}

// Result reports the counts so far.
func (v *Verifier) Result() Result {
	return Result{Chained: v.seq, Unlinked: v.unlinked, LastHash: v.hash}
}

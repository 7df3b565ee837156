package authn

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
)

func TestNewAPIKeyParsesBack(t *testing.T) {
	id, presented, hash := NewAPIKey()
	if !ids.Valid(ids.APIKey, id) {
		t.Fatalf("NewAPIKey id = %q, want key_<uuid>", id)
	}
	if len(presented) != 81 || !strings.HasPrefix(presented, "occk_") {
		t.Errorf("NewAPIKey presented has length %d and prefix %q, want 81 and occk_", len(presented), presented[:5])
	}
	gotID, secret, err := ParseAPIKey(presented)
	if err != nil {
		t.Fatalf("ParseAPIKey(NewAPIKey()) = %v", err)
	}
	if gotID != id {
		t.Errorf("ParseAPIKey id = %q, want %q", gotID, id)
	}
	if !bytes.Equal(hashSecret(secret), hash) || len(hash) != 32 {
		t.Errorf("SHA-256 of parsed secret does not equal NewAPIKey's secretHash")
	}
	if strings.Contains(presented, string(hash)) {
		t.Errorf("presented key contains the stored hash")
	}

	id2, presented2, hash2 := NewAPIKey()
	if id2 == id || presented2 == presented || bytes.Equal(hash2, hash) {
		t.Errorf("two NewAPIKey calls share a part")
	}
}

const testKeyID = "key_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60"

func TestParseAPIKey(t *testing.T) {
	zero := make([]byte, 32)
	valid := formatAPIKey(testKeyID, zero) // secret encodes as 43 × 'A'
	if valid != "occk_0b6f0a3c2f1e4c559a7d1d2c3b4a5f60_"+strings.Repeat("A", 43) {
		t.Fatalf("formatAPIKey = %q; format changed", valid)
	}
	set := func(i int, c string) string { return valid[:i] + c + valid[i+1:] }
	secretAt := 5 + 32 + 1

	type result struct {
		ID     string
		Secret []byte
		Kind   errkind.Kind
		Msg    string
	}
	ok := result{ID: testKeyID, Secret: zero}
	bad := result{Kind: errkind.Unauthenticated, Msg: badKeyMessage}
	tests := []struct {
		name      string
		presented string
		want      result
	}{
		{"valid", valid, ok},
		{"secret with url alphabet", formatAPIKey(testKeyID, bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:32]), result{
			ID: testKeyID, Secret: bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:32]}},
		{"empty", "", bad},
		{"wrong prefix", "occx_" + valid[5:], bad},
		{"uppercase prefix", "OCCK_" + valid[5:], bad},
		{"no prefix", valid[5:], bad},
		{"one short", valid[:len(valid)-1], bad},
		{"one long", valid + "A", bad},
		{"padded secret", valid[:len(valid)-1] + "=", bad},
		{"id one short, secret one long", "occk_" + valid[5:36] + "_A" + valid[secretAt:], bad},
		{"wrong separator", set(secretAt-1, "-"), bad},
		{"dashes in id", "occk_" + testKeyID[4:] + "_" + strings.Repeat("A", 39), bad},
		{"uppercase hex", set(6, "B"), bad},
		{"non-hex in id", set(6, "g"), bad},
		{"not a v4 uuid", set(5+12, "1"), bad},
		{"wrong uuid variant", set(5+16, "c"), bad},
		{"bad char in secret", set(secretAt, "!"), bad},
		{"standard base64 char in secret", set(secretAt, "+"), bad},
		{"space in secret", set(secretAt, " "), bad},
		{"non-canonical last char", set(len(valid)-1, "B"), bad},
		{"non-ascii", set(secretAt, "é")[:81], bad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, secret, err := ParseAPIKey(tc.presented)
			got := result{ID: id, Secret: secret}
			if e := errkind.As(err); e != nil {
				got.Kind, got.Msg = e.Kind, e.Message
			} else if err != nil {
				t.Fatalf("ParseAPIKey(%q) error %v is not an *errkind.Error", tc.presented, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseAPIKey(%q) mismatch (-want +got):\n%s", tc.presented, diff)
			}
		})
	}
}

func TestValidateExpiresIn(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	refused := &errkind.Error{
		Kind:    errkind.Invalid,
		Message: "expiresIn must be between 86400 and 31536000 seconds",
		Details: []errkind.Detail{{Path: "/expiresIn", Code: errkind.DetailInvalidValue}},
	}
	tests := []struct {
		name    string
		seconds *int64
		want    time.Duration
		wantErr *errkind.Error
	}{
		{"default is 30 days", nil, 30 * 24 * time.Hour, nil},
		{"86400 accepted", i64(86_400), 24 * time.Hour, nil},
		{"86399 refused", i64(86_399), 0, refused},
		{"31536000 accepted", i64(31_536_000), 365 * 24 * time.Hour, nil},
		{"31536001 refused", i64(31_536_001), 0, refused},
		{"zero refused", i64(0), 0, refused},
		{"negative refused", i64(-86_400), 0, refused},
		{"huge refused", i64(1 << 62), 0, refused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValidateExpiresIn(tc.seconds)
			if diff := cmp.Diff(tc.wantErr, errkind.As(err)); diff != "" {
				t.Errorf("ValidateExpiresIn error mismatch (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("ValidateExpiresIn = %v, want %v", got, tc.want)
			}
		})
	}
}

func BenchmarkParseAPIKey(b *testing.B) {
	_, presented, _ := NewAPIKey()
	for b.Loop() {
		if _, _, err := ParseAPIKey(presented); err != nil {
			b.Fatal(err)
		}
	}
}

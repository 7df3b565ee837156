package authn

import (
	"context"
	"regexp"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/argon2"

	"github.com/openclaw/occ/internal/errkind"
)

// cheapHash hashes pw with the smallest parameters VerifyPassword accepts,
// so that tests which only need "some valid hash" stay fast.
func cheapHash(pw string) string {
	salt := []byte("0123456789abcdef")
	p := argonParams{memory: minArgonMemoryKiB, time: 1, threads: 1}
	return encodeHash(p, salt, argon2.IDKey([]byte(pw), salt, p.time, p.memory, p.threads, argonKeyLen))
}

var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=2\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)

func TestHashPasswordRoundTrip(t *testing.T) {
	const pw = "correct horse battery staple"
	h1, err := HashPassword(context.Background(), pw)
	if err != nil {
		t.Fatalf("HashPassword: %v", err)
	}
	h2, err := HashPassword(context.Background(), pw)
	if err != nil {
		t.Fatalf("HashPassword: %v", err)
	}
	if !phcPattern.MatchString(h1) {
		t.Errorf("HashPassword = %q, want PHC argon2id string with the default parameters", h1)
	}
	if h1 == h2 {
		t.Errorf("HashPassword twice gave the same string; salts must differ")
	}

	tests := []struct {
		name string
		pw   string
		want bool
	}{
		{"same password", pw, true},
		{"wrong password", pw + "!", false},
		{"case differs", strings.ToUpper(pw), false},
		{"empty", "", false},
		{"over the limit", strings.Repeat("a", MaxPasswordLen+1), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VerifyPassword(h1, tc.pw)
			if err != nil {
				t.Fatalf("VerifyPassword: %v", err)
			}
			if got != tc.want {
				t.Errorf("VerifyPassword(hash, %q...) = %v, want %v", trunc(tc.pw), got, tc.want)
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// The parameters come from the stored string, not from the constants: a
// hash made with other (in-bounds) parameters still verifies.
func TestVerifyPasswordReadsParameters(t *testing.T) {
	h := cheapHash("twelve chars!")
	for _, tc := range []struct {
		pw   string
		want bool
	}{{"twelve chars!", true}, {"twelve chars?", false}} {
		got, err := VerifyPassword(h, tc.pw)
		if err != nil || got != tc.want {
			t.Errorf("VerifyPassword(cheap hash, %q) = %v, %v; want %v, nil", tc.pw, got, err, tc.want)
		}
	}
}

func TestVerifyPasswordRefusesTamperedHash(t *testing.T) {
	valid := cheapHash("twelve chars!")
	parts := strings.Split(valid, "$") // "", argon2id, v=19, params, salt, hash
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "$")
	}
	tests := []struct {
		name    string
		encoded string
	}{
		{"memory absurd", with(3, "m=4194304,t=1,p=1")},
		{"memory above bound", with(3, "m=262145,t=1,p=1")},
		{"memory below bound", with(3, "m=1023,t=1,p=1")},
		{"threads far above bound", with(3, "m=1024,t=1,p=129")},
		{"time zero", with(3, "m=1024,t=0,p=1")},
		{"time absurd", with(3, "m=1024,t=1000000,p=1")},
		{"time above bound", with(3, "m=1024,t=11,p=1")},
		{"threads zero", with(3, "m=1024,t=1,p=0")},
		{"threads above bound", with(3, "m=1024,t=1,p=17")},
		{"threads overflow uint8", with(3, "m=65536,t=1,p=257")},
		{"memory overflow uint32", with(3, "m=4294967297,t=1,p=1")},
		{"negative", with(3, "m=-1024,t=1,p=1")},
		{"plus sign", with(3, "m=+1024,t=1,p=1")},
		{"leading zero", with(3, "m=01024,t=1,p=1")},
		{"reordered", with(3, "t=1,m=1024,p=1")},
		{"missing parameter", with(3, "m=1024,t=1")},
		{"extra parameter", with(3, "m=1024,t=1,p=1,k=1")},
		{"spaces", with(3, "m=1024, t=1, p=1")},
		{"other version", with(2, "v=16")},
		{"argon2i", with(1, "argon2i")},
		{"bcrypt", "$2a$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW"},
		{"empty", ""},
		{"too few fields", strings.Join(parts[:5], "$")},
		{"too many fields", valid + "$x"},
		{"salt padded", with(4, parts[4]+"==")},
		{"salt not base64", with(4, "!!!!!!!!!!!!!!!!!!!!!!")},
		{"salt too short", with(4, "AAAAAAA")},
		{"salt too long", with(4, strings.Repeat("A", 88))},
		{"hash too short", with(5, "AAAAAAAAAAAAAAAAAAAA")},
		{"hash too long", with(5, strings.Repeat("A", 88))},
		{"hash url alphabet", with(5, strings.NewReplacer("+", "-", "/", "_").Replace(parts[5])+"-")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := VerifyPassword(tc.encoded, "twelve chars!")
			if err == nil || ok {
				t.Errorf("VerifyPassword(%q) = %v, %v; want false and an error", tc.encoded, ok, err)
			}
			if err != nil && strings.Contains(err.Error(), "twelve") {
				t.Errorf("VerifyPassword error %q contains the password", err)
			}
		})
	}
}

func TestValidatePassword(t *testing.T) {
	tests := []struct {
		name string
		len  int
		want *errkind.Error // nil: accepted
	}{
		{"11 bytes refused", 11, &errkind.Error{
			Kind: errkind.Invalid, Message: "password must be at least 12 bytes",
			Details: []errkind.Detail{{Path: "/password", Code: errkind.DetailInvalidValue}},
		}},
		{"12 bytes accepted", 12, nil},
		{"1024 bytes accepted", 1024, nil},
		{"1025 bytes refused", 1025, &errkind.Error{
			Kind: errkind.Invalid, Message: "password must be at most 1024 bytes",
			Details: []errkind.Detail{{Path: "/password", Code: errkind.DetailTooLong}},
		}},
		{"empty refused", 0, &errkind.Error{
			Kind: errkind.Invalid, Message: "password must be at least 12 bytes",
			Details: []errkind.Detail{{Path: "/password", Code: errkind.DetailInvalidValue}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pw := strings.Repeat("p", tc.len)
			if diff := cmp.Diff(tc.want, errkind.As(ValidatePassword(pw))); diff != "" {
				t.Errorf("ValidatePassword(%d bytes) mismatch (-want +got):\n%s", tc.len, diff)
			}
			// HashPassword applies the same policy before hashing.
			h, err := HashPassword(context.Background(), pw)
			if diff := cmp.Diff(tc.want, errkind.As(err)); diff != "" {
				t.Errorf("HashPassword(%d bytes) mismatch (-want +got):\n%s", tc.len, diff)
			}
			if tc.want == nil {
				if ok, err := VerifyPassword(h, pw); !ok || err != nil {
					t.Errorf("VerifyPassword(HashPassword(%d bytes)) = %v, %v; want true, nil", tc.len, ok, err)
				}
			}
		})
	}
}

func TestPasswordLengthIsBytes(t *testing.T) {
	// Four 3-byte runes are 12 bytes: accepted although only 4 characters.
	if err := ValidatePassword(strings.Repeat("€", 4)); err != nil {
		t.Errorf("ValidatePassword(4 × €) = %v, want nil (12 bytes)", err)
	}
}

func TestGeneratePassword(t *testing.T) {
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9_-]{24}$`)
	seen := map[string]bool{}
	for range 100 {
		pw := GeneratePassword()
		if !urlSafe.MatchString(pw) {
			t.Fatalf("GeneratePassword() = %q, want 24 URL-safe characters", pw)
		}
		if err := ValidatePassword(pw); err != nil {
			t.Fatalf("ValidatePassword(GeneratePassword()) = %v", err)
		}
		if seen[pw] {
			t.Fatalf("GeneratePassword() repeated %q", pw)
		}
		seen[pw] = true
	}
}

func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := HashPassword(context.Background(), "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyPassword(b *testing.B) {
	h, err := HashPassword(context.Background(), "correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, err := VerifyPassword(h, "correct horse battery staple"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// TestHashCollectsItsBuffer: a hash ends with a collection (before its
// slot is free), so a burst reuses one buffer per slot instead of piling
// them up; the idle release below comes only 250 ms later.
func TestHashCollectsItsBuffer(t *testing.T) {
	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	for i := range 2 {
		before := forced()
		if _, err := HashPassword(context.Background(), "correct-horse-battery-staple-42"); err != nil {
			t.Fatal(err)
		}
		if got := forced(); got <= before {
			t.Errorf("hash %d: forced collections %d before and %d after; want one more when the hash ends", i, before, got)
		}
	}
}

// TestHashingReturnsMemoryWhenIdle: once no hash runs, the argon2 memory
// is handed back with a forced collection (debug.FreeOSMemory), which the
// runtime counts in /gc/cycles/forced:gc-cycles. Bounded: 10 s.
func TestHashingReturnsMemoryWhenIdle(t *testing.T) {
	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := forced()
	if _, err := HashPassword(context.Background(), "correct-horse-battery-staple-42"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for forced() == before {
		if time.Now().After(deadline) {
			t.Fatal("no forced collection within 10 s of the last hash ending")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

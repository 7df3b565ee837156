package authn

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
)

// API key format:
//
//	occk_<32 lowercase hex>_<43 base64url>
//	     \ key id uuid   / \ secret    /
//
// The hex part is the stored key id "key_<uuid>" with the prefix and the
// dashes removed, so the server finds the row by id without scanning and
// without storing anything derived from the secret as a lookup key. The
// secret is 32 bytes from crypto/rand as unpadded base64url; only its
// SHA-256 is stored. The "occk_" prefix lets secret scanners and humans
// recognise a leaked key. Total length: 81 characters.
//
// A plain SHA-256 (not argon2) suffices for the secret because it is 256
// random bits, not a human choice: there is nothing to brute-force.
const (
	APIKeyPrefix     = "occk_"
	apiKeySecretLen  = 32
	apiKeyIDHexLen   = 32
	apiKeySecretBLen = 43 // base64url length of apiKeySecretLen bytes
	apiKeyLen        = len(APIKeyPrefix) + apiKeyIDHexLen + 1 + apiKeySecretBLen
)

// Limits on a key's lifetime, in seconds, and its default (30 days).
const (
	MinAPIKeyExpiresIn     = 86_400
	MaxAPIKeyExpiresIn     = 31_536_000
	DefaultAPIKeyExpiresIn = 30 * 24 * time.Hour
)

// badKeyMessage is the one answer to any API key that does not
// authenticate: malformed, unknown, wrong secret, revoked, expired, or
// belonging to a principal that may not use the API.
const badKeyMessage = "invalid, expired or revoked API key"

func errBadKey() error { return errkind.New(errkind.Unauthenticated, badKeyMessage) }

// NewAPIKey returns a fresh key: its store id ("key_<uuid>"), the value
// shown once to the caller, and the SHA-256 of its secret for
// store.APIKey.SecretHash. Like ids.New it panics only if the operating
// system's random source fails.
func NewAPIKey() (id, presented string, secretHash []byte) {
	id = ids.New(ids.APIKey)
	var secret [apiKeySecretLen]byte
	if _, err := rand.Read(secret[:]); err != nil {
		panic(fmt.Sprintf("authn: crypto/rand failed: %v", err))
	}
	return id, formatAPIKey(id, secret[:]), hashSecret(secret[:])
}

// formatAPIKey is the presented form of a key with store id id.
func formatAPIKey(id string, secret []byte) string {
	hexID := strings.ReplaceAll(strings.TrimPrefix(id, ids.APIKey), "-", "")
	return APIKeyPrefix + hexID + "_" + b64url.EncodeToString(secret)
}

// ParseAPIKey splits a presented key into its store id and its secret.
// Parsing is strict: exact length, prefix and separator, lowercase hex that
// forms a UUIDv4, and canonical base64url for exactly 32 bytes. Any
// deviation is errkind.Unauthenticated with the generic message; the
// presented value is never part of the error.
func ParseAPIKey(presented string) (id string, secret []byte, err error) {
	if len(presented) != apiKeyLen || !strings.HasPrefix(presented, APIKeyPrefix) {
		return "", nil, errBadKey()
	}
	rest := presented[len(APIKeyPrefix):]
	hexID, sep, enc := rest[:apiKeyIDHexLen], rest[apiKeyIDHexLen], rest[apiKeyIDHexLen+1:]
	if sep != '_' {
		return "", nil, errBadKey()
	}
	// ids.Valid accepts only lowercase hex in UUIDv4 layout, so each key
	// has exactly one spelling and any other character fails here.
	id = ids.APIKey + hexID[0:8] + "-" + hexID[8:12] + "-" + hexID[12:16] + "-" + hexID[16:20] + "-" + hexID[20:32]
	if !ids.Valid(ids.APIKey, id) {
		return "", nil, errBadKey()
	}
	secret, err = b64url.DecodeString(enc)
	if err != nil || len(secret) != apiKeySecretLen {
		return "", nil, errBadKey()
	}
	return id, secret, nil
}

// hashSecret is what store.APIKey.SecretHash holds for a secret.
func hashSecret(secret []byte) []byte {
	h := sha256.Sum256(secret)
	return h[:]
}

// ValidateExpiresIn checks a requested key lifetime in seconds (nil: the
// 30-day default) and returns it as a duration. Out of range is
// errkind.Invalid with a detail at /expiresIn.
func ValidateExpiresIn(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return DefaultAPIKeyExpiresIn, nil
	}
	if *seconds < MinAPIKeyExpiresIn || *seconds > MaxAPIKeyExpiresIn {
		return 0, errkind.InvalidDetails(
			fmt.Sprintf("expiresIn must be between %d and %d seconds", MinAPIKeyExpiresIn, MaxAPIKeyExpiresIn),
			errkind.Detail{Path: "/expiresIn", Code: errkind.DetailInvalidValue})
	}
	return time.Duration(*seconds) * time.Second, nil
}

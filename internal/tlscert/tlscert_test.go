package tlscert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// selfSigned returns a PEM certificate for localhost/127.0.0.1 with the
// given serial, its PEM key and the parsed certificate.
func selfSigned(t *testing.T, serial int64) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "occ test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), cert
}

// writeAtomic replaces path the way cert-manager and kubelet do: a new
// file renamed over the old one.
func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRotationWithoutRestart serves TLS on loopback with a Reloader,
// rotates the pair on disk and checks what each new connection is served:
// the new certificate once the interval passed (injected clock), the old
// one until then, and the old one while the pair on disk is broken.
func TestRotationWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certA, keyA, a := selfSigned(t, 1)
	certB, keyB, b := selfSigned(t, 2)
	certC, keyC, c := selfSigned(t, 3)
	writeAtomic(t, certFile, certA)
	writeAtomic(t, keyFile, keyA)

	clock := testutil.NewClock(time.Time{})
	r, err := New(Options{CertFile: certFile, KeyFile: keyFile, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.(*tls.Conn).Handshake()
			}()
		}
	}()
	roots := x509.NewCertPool()
	for _, c := range []*x509.Certificate{a, b, c} {
		roots.AddCert(c)
	}
	served := func() int64 {
		t.Helper()
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}

	var got []int64
	got = append(got, served()) // 1: the initial pair
	writeAtomic(t, certFile, certB)
	writeAtomic(t, keyFile, keyB)
	got = append(got, served()) // 1: the interval has not passed
	clock.Advance(DefaultInterval)
	got = append(got, served()) // 2: rotated, no restart
	// A half-done rotation (new certificate, old key) keeps serving B.
	writeAtomic(t, certFile, certC)
	clock.Advance(DefaultInterval)
	got = append(got, served()) // 2
	writeAtomic(t, keyFile, keyC)
	clock.Advance(DefaultInterval)
	got = append(got, served()) // 3: complete again
	if diff := cmp.Diff([]int64{1, 1, 2, 2, 3}, got); diff != "" {
		t.Errorf("serials served to successive connections (-want +got):\n%s", diff)
	}
}

func TestNewRefusesBadPairs(t *testing.T) {
	dir := t.TempDir()
	certA, keyA, _ := selfSigned(t, 1)
	_, keyB, _ := selfSigned(t, 2)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := make([]byte, maxFileBytes+1)
	for _, tc := range []struct{ name, cert, key string }{
		{"missing cert", filepath.Join(dir, "nope"), write("k1", keyA)},
		{"mismatched key", write("c1", certA), write("k2", keyB)},
		{"not PEM", write("c2", []byte("hello")), write("k3", keyA)},
		{"too large", write("c3", big), write("k4", keyA)},
		{"no key file", write("c4", certA), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Options{CertFile: tc.cert, KeyFile: tc.key}); err == nil {
				t.Fatal("New succeeded; want an error")
			} else if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(keyA[40:80])) {
				t.Fatalf("error quotes the key: %v", err)
			}
		})
	}
}

// TestFileSizeLimit: a PEM file of exactly maxFileBytes (a chain padded
// with line breaks, which PEM parsing skips) loads; one byte more is
// refused by its size, naming the file and the limit.
func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := selfSigned(t, 1)
	pad := func(b []byte, n int) []byte { return append(append([]byte{}, b...), strings.Repeat("\n", n-len(b))...) }
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("key", key)
	past := write("cert-past", pad(cert, maxFileBytes+1))
	for _, tc := range []struct {
		name, cert, key string
		wantErr         string // "": loads
	}{
		{"cert at the limit", write("cert-at", pad(cert, maxFileBytes)), keyFile, ""},
		{"key at the limit", write("cert", cert), write("key-at", pad(key, maxFileBytes)), ""},
		{"cert one past", past, keyFile, "tls: " + past + " is larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{CertFile: tc.cert, KeyFile: tc.key})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("New: error %q, want %q", got, tc.wantErr)
			}
		})
	}
}

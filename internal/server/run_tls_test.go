package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testutil"
)

// testCert writes a self-signed certificate for 127.0.0.1 with serial n
// over certFile and keyFile (rename, as cert-manager's volume update does)
// and returns it.
func testCert(t *testing.T, n int64, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: "occ"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	for path, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// TestRunServesRotatedCertificate runs "occ server" (server.Run) with
// --tls-cert-file/--tls-key-file on loopback: it serves HTTPS with HSTS,
// a certificate rotated on disk is served to a later connection without a
// restart, and cancelling the context shuts it down cleanly.
func TestRunServesRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	roots := x509.NewCertPool()
	roots.AddCert(testCert(t, 1, certFile, keyFile))
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	cfg := config.Default()
	cfg.DataDir, cfg.Listen, cfg.PublicOrigin = filepath.Join(dir, "data"), addr, "https://"+addr
	cfg.ComputeDriver, cfg.BootstrapAdminPasswordFile = "none", pw
	cfg.TLSCertFile, cfg.TLSKeyFile = certFile, keyFile
	cfg.ShutdownTimeout = 5 * time.Second
	// Configured sign-in limits reach the server's throttle: one failure
	// locks an account for an hour (the default would answer 401 again).
	cfg.SignInAccount.FreeFailures, cfg.SignInAccount.LockFailures, cfg.SignInAccount.Lockout = 0, 1, time.Hour
	ctx, cancel := context.WithCancel(testutil.Context(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	// Each call is a new connection (keep-alives off), so each handshake
	// asks for the current certificate.
	get := func() (serial int64, hsts string, err error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), resp.Header.Get("Strict-Transport-Security"), nil
	}
	var serial int64
	var hsts string
	testutil.Eventually(t, 60*time.Second, func() bool {
		serial, hsts, err = get()
		return err == nil
	}, "the server did not answer over TLS: %v", err)
	if serial != 1 || hsts != "max-age=31536000" {
		t.Fatalf("first connection: serial %d, HSTS %q; want 1 and max-age=31536000", serial, hsts)
	}

	roots.AddCert(testCert(t, 2, certFile, keyFile))
	// The files are re-read at most once a second, on a handshake.
	testutil.Eventually(t, 10*time.Second, func() bool {
		serial, _, err = get()
		return err == nil && serial == 2
	}, "the rotated certificate was not served: serial %d, %v", serial, err)

	signIn := func() (int, string) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("POST", "https://"+addr+"/api/auth/sign-in/email",
			strings.NewReader(`{"email":"admin@localhost","password":"wrong password"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", cfg.PublicOrigin)
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if code, _ := signIn(); code != http.StatusUnauthorized {
		t.Fatalf("first wrong sign-in: %d, want 401", code)
	}
	// Retry-After counts from the failure (the real clock; hashing is slow
	// under the race detector): within a minute of the configured hour.
	if code, after := signIn(); code != http.StatusTooManyRequests || after < "3540" || after > "3600" || len(after) != 4 {
		t.Fatalf("second wrong sign-in: %d Retry-After %q; want 429 after the configured 1 h lockout", code, after)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(cfg.ShutdownTimeout + 5*time.Second):
		t.Fatal("Run did not return within the shutdown timeout")
	}
}

// Package tlscert owns OCC's serving certificate: it loads a PEM
// certificate chain and private key from two files and serves them through
// tls.Config.GetCertificate, re-reading the files when their content
// changes, so that a rotated certificate (cert-manager, a renewed Let's
// Encrypt pair, an operator's copy) is served to the next connection
// without a restart.
//
// Failure semantics: New fails when the pair does not load, so a server
// never starts without a certificate. After that, a pair that does not
// load (a half-written rotation, a key that does not match) is logged and
// the previous certificate keeps being served; the files are read again
// at the next check, so the rotation takes effect once both files are
// complete. Key material is never logged.
package tlscert

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often, at most, the files are read again: on the
// first TLS handshake after the interval has passed, never in the
// background. Reading two small files once a second is cheap.
const DefaultInterval = time.Second

// maxFileBytes bounds each PEM file: a chain of a few certificates is a
// few KiB; anything near this is not a certificate file.
const maxFileBytes = 1 << 20

// Options configure a Reloader.
type Options struct {
	CertFile, KeyFile string
	Logger            *slog.Logger
	// Now is the clock (nil: time.Now); Interval is DefaultInterval when
	// zero.
	Now      func() time.Time
	Interval time.Duration
}

// Reloader serves the current certificate of a file pair.
type Reloader struct {
	o    Options
	cert atomic.Pointer[tls.Certificate]

	mu        sync.Mutex // serializes checks
	lastCheck time.Time
	certPEM   []byte
	keyPEM    []byte
}

// New loads the pair once; an error names the file, never its content.
func New(o Options) (*Reloader, error) {
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("tls: both a certificate file and a key file are needed")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	r := &Reloader{o: o}
	certPEM, keyPEM, err := r.read()
	if err != nil {
		return nil, err
	}
	if err := r.install(certPEM, keyPEM); err != nil {
		return nil, err
	}
	r.lastCheck = o.Now()
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate: the current certificate,
// after re-reading the files if the interval has passed.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.check()
	return r.cert.Load(), nil
}

// Reload reads the files now, whatever the interval; it returns the error
// of a pair that does not load (the previous certificate stays).
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked()
}

func (r *Reloader) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Now()
	if now.Sub(r.lastCheck) < r.o.Interval {
		return
	}
	r.lastCheck = now
	if err := r.reloadLocked(); err != nil {
		r.o.Logger.Warn("tls: the certificate files changed but do not load; still serving the previous certificate",
			"certFile", r.o.CertFile, "keyFile", r.o.KeyFile, "error", err)
	}
}

func (r *Reloader) reloadLocked() error {
	certPEM, keyPEM, err := r.read()
	if err != nil {
		return err
	}
	if bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		return nil
	}
	if err := r.install(certPEM, keyPEM); err != nil {
		return err
	}
	if leaf := r.cert.Load().Leaf; leaf != nil {
		r.o.Logger.Info("tls: serving a new certificate", "certFile", r.o.CertFile, "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter)
	}
	return nil
}

// install parses the pair and makes it current.
func (r *Reloader) install(certPEM, keyPEM []byte) error {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors describe the problem (no PEM block, key
		// mismatch), not the key.
		return fmt.Errorf("tls: load %s and %s: %w", r.o.CertFile, r.o.KeyFile, err)
	}
	r.cert.Store(&c)
	r.certPEM, r.keyPEM = certPEM, keyPEM
	return nil
}

func (r *Reloader) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = readBounded(r.o.CertFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = readBounded(r.o.KeyFile); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tls: read %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("tls: %s is larger than %d bytes", path, maxFileBytes)
	}
	return b, nil
}

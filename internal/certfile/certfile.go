// Package certfile serves a TLS certificate from PEM files and reloads them
// when they change (a renewed certificate is picked up without a restart).
package certfile

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// checkEvery is how often the files' modification times are looked at.
const checkEvery = time.Second

// Reloader holds the certificate of a certificate and key file pair.
type Reloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' modification times and sizes
	checked time.Time
}

// Config configures a Reloader.
type Config struct {
	CertFile, KeyFile string
	Logger            *slog.Logger
}

// New loads the files; they must hold a valid pair.
func New(cfg Config) (*Reloader, error) {
	r := &Reloader{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	stamp, err := r.stampNow()
	if err != nil {
		return nil, err
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	r.cert, r.stamp, r.checked = &c, stamp, time.Now()
	return r, nil
}

func (r *Reloader) stampNow() (string, error) {
	var s string
	for _, p := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("tls certificate: %w", err)
		}
		s += fmt.Sprintf("%d/%d;", st.ModTime().UnixNano(), st.Size())
	}
	return s, nil
}

// GetCertificate is tls.Config's hook: the current certificate, reloaded
// first if the files changed (checked at most once a second). A pair that
// fails to load keeps the previous one in service, and is logged.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < checkEvery {
		return r.cert, nil
	}
	r.checked = time.Now()
	stamp, err := r.stampNow()
	if err != nil || stamp == r.stamp {
		return r.cert, nil
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// A renewal half written (the certificate before the key): try
		// again at the next check.
		r.log.Warn("tls certificate changed but does not load; serving the previous one", "err", err)
		return r.cert, nil
	}
	r.cert, r.stamp = &c, stamp
	r.log.Info("tls certificate reloaded", "file", r.certFile)
	return r.cert, nil
}

// TLSConfig is a server configuration serving the reloaded certificate
// with HTTP/2 and HTTP/1.1 (ALPN), TLS 1.2 at least.
func (r *Reloader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

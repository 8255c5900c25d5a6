// Package tlscert serves HTTPS from a certificate and key pair that can be replaced while the server
// runs: connections already open keep the certificate they were made with, new ones get the pair as
// last loaded, and a pair that cannot be used never replaces a good one.
package tlscert

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// Pair is a certificate and its key, read from two PEM files, swapped atomically on Reload.
type Pair struct {
	certFile, keyFile string
	now               func() time.Time
	current           atomic.Pointer[tls.Certificate]
}

// Load reads the pair from certFile and keyFile; it fails as Reload does, naming both files.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile, now: time.Now}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload reads the files again and, if they hold a usable pair, serves it to every new connection.
// A pair is usable when the key matches the certificate and the certificate is valid now; otherwise
// Reload returns why and the pair served so far stays, so that a renewal caught half-written (a new
// certificate beside the old key) costs nothing.
func (p *Pair) Reload() error {
	c, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return fmt.Errorf("TLS pair %s, %s: %w", p.certFile, p.keyFile, err)
	}
	if now := p.now(); now.Before(c.Leaf.NotBefore) || now.After(c.Leaf.NotAfter) {
		return fmt.Errorf("TLS pair %s, %s: the certificate is valid from %s to %s, not now", p.certFile, p.keyFile,
			c.Leaf.NotBefore.UTC().Format(time.RFC3339), c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	p.current.Store(&c)
	return nil
}

// Certificate is the pair served to new connections.
func (p *Pair) Certificate() *tls.Certificate { return p.current.Load() }

// Config is the server configuration: HTTP/2 offered first, then HTTP/1.1, and TLS 1.2 at least,
// with only its suites that have forward secrecy and authenticated encryption (Mozilla's
// "intermediate" profile) — PCI DSS v4.0 requirement 4.2.1 asks for "strong cryptography" on open
// networks, which rules out TLS 1.0 and 1.1 and the CBC suites scanners flag. TLS 1.3's suites are
// all of that kind and not configurable. The certificate is looked up at each handshake, so a Reload
// reaches the next one.
func (p *Pair) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.current.Load(), nil
		},
	}
}

// Log writes msg with what identifies the certificate served: its names, serial number and expiry.
func (p *Pair) Log(log *slog.Logger, msg string) {
	leaf := p.current.Load().Leaf
	log.Info(msg, "subject", leaf.Subject.String(), "dns_names", leaf.DNSNames, "serial", leaf.SerialNumber.Text(16),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}

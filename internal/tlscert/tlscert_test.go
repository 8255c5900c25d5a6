package tlscert_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/tlscert"
	"github.com/kassapay/kassa/internal/tlscert/tlscerttest"
)

// served starts a TLS listener on p's configuration and returns a function that makes a new
// connection, trusting the given certificates, and returns the certificate the server presented and
// the protocol it chose.
func served(t *testing.T, p *tlscert.Pair) func(trust ...*x509.Certificate) (*x509.Certificate, string, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	return func(trust ...*x509.Certificate) (*x509.Certificate, string, error) {
		pool := x509.NewCertPool()
		for _, c := range trust {
			pool.AddCert(c)
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			return nil, "", err
		}
		defer c.Close()
		st := c.ConnectionState()
		return st.PeerCertificates[0], st.NegotiatedProtocol, nil
	}
}

// A reload serves the new pair to the next connection; a pair that cannot be used — a key of another
// certificate, a file that is not PEM, a missing file, an expired certificate — is refused and the
// pair served before stays.
func TestReload(t *testing.T) {
	t.Parallel()
	a, b, c := tlscerttest.New(t, "a"), tlscerttest.New(t, "b"), tlscerttest.New(t, "c")
	live := tlscerttest.New(t, "live") // the files the server reads
	a.CopyTo(t, live.CertFile, live.KeyFile)
	p, err := tlscert.Load(live.CertFile, live.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	dial := served(t, p)
	got, proto, err := dial(a.Cert)
	if err != nil || !got.Equal(a.Cert) || proto != "h2" {
		t.Fatalf("first connection: %v, %q, %v; want a's certificate and h2", got.Subject, proto, err)
	}

	b.CopyTo(t, live.CertFile, live.KeyFile)
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := dial(a.Cert, b.Cert); err != nil || !got.Equal(b.Cert) {
		t.Fatalf("after reloading b: %v, %v", got.Subject, err)
	}

	expired := tlscerttest.NewValid(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	bad := map[string]func(){
		"another certificate's key": func() {
			tlscerttest.Pair{CertFile: c.CertFile, KeyFile: a.KeyFile}.CopyTo(t, live.CertFile, live.KeyFile)
		},
		"not PEM":                func() { os.WriteFile(live.CertFile, []byte("not a certificate"), 0o600) },
		"a missing key":          func() { os.Remove(live.KeyFile) },
		"an expired certificate": func() { expired.CopyTo(t, live.CertFile, live.KeyFile) },
	}
	for name, breakFiles := range bad {
		breakFiles()
		err := p.Reload()
		if err == nil || !strings.Contains(err.Error(), live.CertFile) {
			t.Errorf("reload with %s: %v; want an error naming the files", name, err)
		}
		if got, _, err := dial(b.Cert); err != nil || !got.Equal(b.Cert) {
			t.Errorf("after a reload with %s: %v, %v; want b still served", name, got.Subject, err)
		}
	}
	if _, err := tlscert.Load(live.CertFile, live.KeyFile); err == nil {
		t.Error("Load of an expired pair succeeded")
	}
}

// TLS 1.0 and 1.1 are refused, and so is TLS 1.2 with a CBC suite; TLS 1.2 with an AEAD suite and TLS
// 1.3 are served.
func TestVersionsAndSuites(t *testing.T) {
	t.Parallel()
	pair := tlscerttest.New(t, "a")
	p, err := tlscert.Load(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	pool := x509.NewCertPool()
	pool.AddCert(pair.Cert)
	for _, tc := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"TLS 1.0 and 1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"TLS 1.2 with CBC", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
		{"TLS 1.2 with GCM", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13}, true},
	} {
		tc.client.RootCAs = pool
		c, err := tls.Dial("tcp", ln.Addr().String(), tc.client)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want connected %v", tc.name, err, tc.ok)
		}
		if err == nil {
			c.Close()
		}
	}
}

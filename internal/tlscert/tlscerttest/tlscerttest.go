// Package tlscerttest makes certificates for tests — self-signed ones, and test CAs with the
// certificates they sign — for 127.0.0.1 and localhost, good for a server and a client, written as PEM
// files a real server can load.
package tlscerttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pair is a certificate and its key, in the files CertFile and KeyFile.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// New writes a pair named name (its common name), valid from an hour ago to an hour from now.
func New(t testing.TB, name string) Pair {
	t.Helper()
	return NewValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// NewValid writes a pair named name, valid from notBefore to notAfter, into a new temporary
// directory. The certificate is its own CA, so a pool holding it verifies it.
func NewValid(t testing.TB, name string, notBefore, notAfter time.Time) Pair {
	t.Helper()
	p, _ := issue(t, name, notBefore, notAfter, true, nil, nil)
	return p
}

// CA is a certificate authority of a test, apart from the certificates it signs: a pool holding
// CA.Cert (or the file CA.CertFile) verifies them, as a private CA's clients do.
type CA struct {
	Pair
	key *ecdsa.PrivateKey
}

// NewCA writes a certificate authority named name, valid from an hour ago to an hour from now, that
// signs nothing but certificates (it is no server's certificate itself).
func NewCA(t testing.TB, name string) CA {
	t.Helper()
	p, key := issue(t, name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), true, nil, nil)
	return CA{Pair: p, key: key}
}

// Issue writes a server's pair named name for 127.0.0.1 and localhost, signed by ca and not a CA
// itself: only a pool that holds ca verifies it.
func (ca CA) Issue(t testing.TB, name string) Pair {
	t.Helper()
	p, _ := issue(t, name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), false, ca.Cert, ca.key)
	return p
}

// issue writes a pair named name into a new temporary directory and returns it with its key: a CA
// (isCA) or a server's certificate, signed by parent's key, or by its own when parent is nil.
func issue(t testing.TB, name string, notBefore, notAfter time.Time, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (Pair, *ecdsa.PrivateKey) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, priv
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &priv.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := Pair{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Cert: cert}
	for name, data := range map[string][]byte{
		p.CertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.KeyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p, priv
}

// CopyTo writes the pair's files over certFile and keyFile, as a renewal would.
func (p Pair) CopyTo(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for from, to := range map[string]string{p.CertFile: certFile, p.KeyFile: keyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

package webhook

import (
	"crypto/x509"
	"errors"
)

// RootsWith returns the certificate authorities deliveries trust when the operator adds its own
// (`kassa serve --webhooks-ca-file`): the system's roots and every certificate of pem, a PEM file of
// one or more. A receiver whose certificate a private CA signed is then reached as one a public CA
// signed; every other receiver still is. A file without a certificate is an error, not a silent
// no-op: the operator meant to trust something.
func RootsWith(pem []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		// No system roots to read (a minimal container): the file's CAs alone, as the system's
		// would have been none.
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

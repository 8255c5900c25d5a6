package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/kassapay/kassa/internal/tlscert/tlscerttest"
)

// tlsClient is an HTTP client that trusts only the given certificates and offers HTTP/2.
func tlsClient(trust ...*x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	for _, c := range trust {
		pool.AddCert(c)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

// tlsGet is what one GET of url through c showed: the protocol, the certificate the server presented,
// and the connection it went over (local address, and whether it was reused).
type tlsGet struct {
	proto  string
	cert   *x509.Certificate
	local  string
	reused bool
}

func getTLS(t *testing.T, c *http.Client, url string) tlsGet {
	t.Helper()
	var got tlsGet
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		got.local, got.reused = info.Conn.LocalAddr().String(), info.Reused
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET %s: %d, TLS %v", url, resp.StatusCode, resp.TLS)
	}
	got.proto, got.cert = resp.Proto, resp.TLS.PeerCertificates[0]
	return got
}

// "kassa serve --tls-cert --tls-key" serves HTTPS with HTTP/2. SIGHUP swaps in a renewed pair: a
// keep-alive connection opened before goes on working, new connections see the new certificate,
// and a broken pair on a later SIGHUP is logged and leaves the renewed one served.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	first, renewed := tlscerttest.New(t, "first"), tlscerttest.New(t, "renewed")
	live := tlscerttest.New(t, "live") // the files kassa reads, overwritten as a renewal would
	first.CopyTo(t, live.CertFile, live.KeyFile)
	srv := startServer(t, nil, "--data-dir", t.TempDir(), "--tls-cert", live.CertFile, "--tls-key", live.KeyFile)
	if !strings.HasPrefix(srv.url, "https://127.0.0.1:") {
		t.Fatalf("listening on %s, want https://", srv.url)
	}
	if _, err := http.Get(srv.url + "/healthz"); err == nil {
		t.Fatal("a client that does not trust the certificate got an answer")
	}

	kept := tlsClient(first.Cert, renewed.Cert)
	before := getTLS(t, kept, srv.url+"/healthz")
	if before.proto != "HTTP/2.0" || !before.cert.Equal(first.Cert) {
		t.Fatalf("first request: %s with %v; want HTTP/2.0 with the first certificate", before.proto, before.cert.Subject)
	}
	// Served over HTTPS, every answer tells browsers to keep to HTTPS.
	for _, path := range []string{"/healthz", "/no-such-route", "/dashboard/sign-in"} {
		resp, err := tlsClient(first.Cert).Get(srv.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if hsts := resp.Header.Get("Strict-Transport-Security"); hsts != "max-age=31536000" {
			t.Fatalf("GET %s over HTTPS: %d with Strict-Transport-Security %q", path, resp.StatusCode, hsts)
		}
	}

	renewed.CopyTo(t, live.CertFile, live.KeyFile)
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitForIn(t, srv, srv.stderr, `"msg":"TLS certificate reloaded"`)
	after := getTLS(t, kept, srv.url+"/readyz")
	if !after.reused || after.local != before.local || !after.cert.Equal(first.Cert) {
		t.Fatalf("after SIGHUP the open connection: %+v; want %s reused, with the certificate it was opened with", after, before.local)
	}
	if got := getTLS(t, tlsClient(first.Cert, renewed.Cert), srv.url+"/healthz"); got.reused || !got.cert.Equal(renewed.Cert) {
		t.Fatalf("a new connection after SIGHUP got %v; want the renewed certificate", got.cert.Subject)
	}

	if err := os.WriteFile(live.KeyFile, []byte("-----BEGIN EC PRIVATE KEY-----\nbroken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitForIn(t, srv, srv.stderr, `"msg":"TLS certificate not reloaded; the previous one is still served"`)
	if got := getTLS(t, tlsClient(renewed.Cert), srv.url+"/healthz"); !got.cert.Equal(renewed.Cert) {
		t.Fatalf("after a broken pair, a new connection got %v; want the renewed certificate", got.cert.Subject)
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, srv.stderr)
	}
}

// --tls-cert and --tls-key go together, and a pair that cannot be used stops the server from starting
// with the reason.
func TestServeTLSFlags(t *testing.T) {
	t.Parallel()
	pair := tlscerttest.New(t, "kassa")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", pair.CertFile}, 2, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-key", pair.KeyFile}, 2, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", pair.CertFile, "--tls-key", pair.CertFile}, 1, "TLS pair " + pair.CertFile},
		{[]string{"--tls-cert", pair.CertFile + ".missing", "--tls-key", pair.KeyFile}, 1, "no such file"},
	} {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)
		_, stderr, code := cli(t, args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("kassa %s: exit %d, %q; want exit %d and %q", strings.Join(args, " "), code, stderr, tc.code, tc.want)
		}
	}
}

// Without TLS, SIGHUP (systemctl reload) is logged and the server goes on serving; over plain HTTP
// (its public URL http://) no answer carries Strict-Transport-Security.
func TestServeHangupWithoutTLS(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil, "--data-dir", t.TempDir())
	srv.cmd.Process.Signal(syscall.SIGHUP)
	waitForIn(t, srv, srv.stderr, `"msg":"SIGHUP: nothing to reload without --tls-cert"`)
	if resp, _ := getJSON(t, "GET", srv.url+"/healthz", nil, nil); resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") != "" {
		t.Fatalf("healthz after SIGHUP: %d, Strict-Transport-Security %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, srv.stderr)
	}
}

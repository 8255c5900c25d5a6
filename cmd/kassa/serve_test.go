package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/card/cardtest"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// The operator's whole first hour, on each backend: the server runs, the CLI creates a merchant and
// more client pairs against the same database while it runs, the pairs get tokens, a revoked pair
// does not, and no secret reaches the logs.
func TestServeAndOperateOnBothBackends(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := dbArgs(t, backend)
			srv := startServer(t, nil, db...)

			for _, path := range []string{"/healthz", "/readyz"} {
				resp, body := getJSON(t, "GET", srv.url+path, nil, nil)
				if resp.StatusCode != 200 || resp.Header.Get("Request-Id") == "" {
					t.Fatalf("%s: %d %v", path, resp.StatusCode, body)
				}
			}

			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Maple Goods", "--email", "ops@maple.example", "--password", "a long passphrase", "--currency", "CAD"}, db...)...)
			id, _ := m["merchant_id"].(string)
			if !regexp.MustCompile(`^[0-9a-f]{10}$`).MatchString(id) || m["account_id"] != "acct_"+id ||
				m["name"] != "Maple Goods" || m["email"] != "ops@maple.example" ||
				!hex32.MatchString(m["client_id"].(string)) || !hex32.MatchString(m["client_secret"].(string)) {
				t.Fatalf("merchant create printed %v", m)
			}
			cfg := clientcredentials.Config{ClientID: m["client_id"].(string), ClientSecret: m["client_secret"].(string), TokenURL: srv.url + "/oauth/token"}
			tok, err := cfg.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok.Extra("merchant_id") != id || time.Until(tok.Expiry) < 11*time.Hour {
				t.Fatalf("token %+v", tok)
			}

			c := cliJSON(t, append([]string{"client", "create", "--merchant-id", id, "--validity", "30m"}, db...)...)
			if c["merchant_id"] != id || c["token_validity_seconds"] != float64(1800) || !hex32.MatchString(c["client_id"].(string)) {
				t.Fatalf("client create printed %v", c)
			}
			cfg2 := clientcredentials.Config{ClientID: c["client_id"].(string), ClientSecret: c["client_secret"].(string), TokenURL: srv.url + "/oauth/token"}
			tok2, err := cfg2.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok2.Extra("expires_in") != float64(1800) {
				t.Fatalf("expires_in %v, want 1800", tok2.Extra("expires_in"))
			}

			list := func(tok string) int {
				resp, _ := getJSON(t, "GET", srv.url+"/transaction-service/transaction", nil, map[string]string{"Authorization": "Bearer " + tok})
				return resp.StatusCode
			}
			if code := list(tok2.AccessToken); code != 200 {
				t.Fatalf("the pair's token before revocation: %d", code)
			}
			r := cliJSON(t, append([]string{"client", "revoke", "--client-id", c["client_id"].(string)}, db...)...)
			if r["revoked"] != true {
				t.Fatalf("client revoke printed %v", r)
			}
			// The server learns of the CLI's revocation by polling (default every 5 s); the bound is 60 s.
			revokedAt := time.Now()
			for list(tok2.AccessToken) != 401 {
				if time.Since(revokedAt) > 60*time.Second {
					t.Fatal("a revoked client's token still works 60 s later")
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("revoked token refused %v after the CLI revoked its client", time.Since(revokedAt).Round(100*time.Millisecond))
			if code := list(tok.AccessToken); code != 200 {
				t.Fatalf("another client's token stopped working: %d", code)
			}
			if _, err := cfg2.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "invalid_client") {
				t.Fatalf("revoked pair got a token: %v", err)
			}

			if err := srv.stop(t); err != nil {
				t.Fatalf("serve exited with %v:\n%s", err, srv.stderr)
			}
			logs := srv.stderr.String()
			for _, secret := range []string{m["client_secret"].(string), c["client_secret"].(string), tok.AccessToken, tok2.AccessToken} {
				if strings.Contains(logs, secret) {
					t.Fatal("a client secret or access token appears in the server's log")
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
				if !json.Valid([]byte(line)) {
					t.Fatalf("log line is not JSON: %q", line)
				}
			}
			if !strings.Contains(logs, `"request_id"`) {
				t.Fatal("no request_id in the access log")
			}
		})
	}
}

// "make run" on an empty database creates a demo merchant and prints a curl command that gets a token;
// the next start prints no secret.
func TestDemoMerchantQuickstart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, nil, "--data-dir", dir, "--demo")
	out := waitFor(t, srv, "grant_type=client_credentials")
	curl := regexp.MustCompile(`(?m)^\s+(curl .*)$`).FindStringSubmatch(out)
	if curl == nil {
		t.Fatalf("no curl command in:\n%s", out)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	got, err := exec.Command("sh", "-c", curl[1]).Output()
	if err != nil {
		t.Fatalf("%s: %v", curl[1], err)
	}
	var tok map[string]any
	if err := json.Unmarshal(got, &tok); err != nil || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(43200) {
		t.Fatalf("the printed curl command answered %s", got)
	}
	srv.stop(t)

	id := regexp.MustCompile(`(?m)^\s+merchant_id\s+(\w+)$`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no merchant_id in:\n%s", out)
	}
	again := startServer(t, nil, "--data-dir", dir, "--demo")
	out = waitFor(t, again, "already has its demo merchant")
	if strings.Contains(out, "client_secret") {
		t.Fatalf("second start printed a secret:\n%s", out)
	}
	// The second start names the demo merchant and the command that makes it a new secret, which works.
	create := regexp.MustCompile(`bin/kassa (client create --merchant-id (\w+))`).FindStringSubmatch(out)
	if create == nil || create[2] != id[1] {
		t.Fatalf("second start does not say how to get a new secret for %s:\n%s", id[1], out)
	}
	if c := cliJSON(t, append(strings.Fields(create[1]), "--data-dir", dir)...); c["merchant_id"] != id[1] || c["client_secret"] == "" {
		t.Fatalf("%s printed %v", create[1], c)
	}
}

// waitFor waits up to 10 s for s to print text on stdout, and returns all it printed.
func waitFor(t *testing.T, s *server, text string) string {
	t.Helper()
	return waitForIn(t, s, s.stdout, text)
}

// waitForIn waits up to 10 s for text to appear in out, s's stdout or stderr, and returns out.
func waitForIn(t *testing.T, s *server, out *cardtest.Buffer, text string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never printed; stdout:\n%s\nstderr:\n%s", text, s.stdout, s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.String()
}

// Flags have environment equivalents, and --public-url sets the URLs the server hands out.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServer(t, []string{"KASSA_DATA_DIR=" + dir, "KASSA_PUBLIC_URL=https://pay.example.test", "KASSA_DEMO=1"})
	out := waitFor(t, srv, "/oauth/token")
	if srv.url != "https://pay.example.test" || !strings.Contains(out, "https://pay.example.test/oauth/token") {
		t.Fatalf("public URL not used:\n%s", out)
	}
	if _, err := os.Stat(dir + "/kassa.db"); err != nil {
		t.Fatalf("KASSA_DATA_DIR not used: %v", err)
	}
	srv.stop(t)
	addr := freeAddr(t)
	srv = startServer(t, []string{"KASSA_DATA_DIR=" + dir, "KASSA_ADDR=" + addr}, "--addr", addr)
	if resp, _ := getJSON(t, "GET", "http://"+addr+"/healthz", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("healthz on %s: %d", addr, resp.StatusCode)
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// SIGTERM lets a request that is in flight finish: here a token request whose body is still arriving
// when the signal comes.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "shop@example.com", "--data-dir", dir)
	srv := startServer(t, nil, "--data-dir", dir)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := "grant_type=client_credentials&client_id=" + m["client_id"].(string) + "&client_secret=" + m["client_secret"].(string)
	head := "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
	conn.Write([]byte(head + body[:10]))
	time.Sleep(200 * time.Millisecond) // the server has read the head: the request is in flight
	srv.cmd.Process.Signal(os.Interrupt)
	time.Sleep(200 * time.Millisecond)
	conn.Write([]byte(body[10:]))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request was dropped: %v", err)
	}
	var tok map[string]any
	json.NewDecoder(resp.Body).Decode(&tok)
	if resp.StatusCode != 200 || tok["access_token"] == nil {
		t.Fatalf("in-flight request: %d %v", resp.StatusCode, tok)
	}
	select {
	case err := <-srv.done:
		if err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not exit after the in-flight request finished")
	}
	if !strings.Contains(srv.stderr.String(), `"shutting down"`) {
		t.Fatal("no shutdown log line")
	}
	// New connections are refused once it is down.
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.url, "http://"), time.Second); err == nil {
		t.Fatal("still accepting connections after shutdown")
	}
}

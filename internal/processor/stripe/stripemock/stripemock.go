// Package stripemock starts stripe-mock (github.com/stripe/stripe-mock, installed by
// scripts/test-deps.sh) for a test: Stripe's own mock of its API, which checks every request against
// Stripe's OpenAPI description and answers fixtures. It tells whether requests are valid, not what
// Stripe would decide. When stripe-mock is missing the test skips, unless KASSA_REQUIRE_ALL=1, which
// makes it fail.
package stripemock

import (
	"bufio"
	"context"
	"go/build"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// Version is the stripe-mock that scripts/test-deps.sh installs.
const Version = "v0.203.0"

// path finds stripe-mock on PATH or where `go install` puts it.
func path() (string, bool) {
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, true
	}
	bin := os.Getenv("GOBIN")
	if bin == "" {
		bin = filepath.Join(build.Default.GOPATH, "bin")
	}
	p := filepath.Join(bin, "stripe-mock")
	if _, err := os.Stat(p); err != nil {
		return "", false
	}
	return p, true
}

// Start starts stripe-mock on free ports of 127.0.0.1, waits until it answers, and returns its HTTP
// base URL (an api_base for the connector). It stops when t ends.
func Start(t testing.TB) string {
	t.Helper()
	bin, ok := path()
	if !ok {
		storetest.Unavailable(t, "stripe-mock is not installed (go install github.com/stripe/stripe-mock@%s)", Version)
	}
	// Both listeners on ports the system chooses: without -https-addr stripe-mock also binds HTTPS on
	// a fixed default port, which two tests at once (or another program) would contend for.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		const prefix = "Listening for HTTP at address: "
		s := bufio.NewScanner(out)
		for s.Scan() {
			if a, ok := strings.CutPrefix(s.Text(), prefix); ok {
				addr <- a
				break
			}
		}
		io.Copy(io.Discard, out) // keep draining, so that stripe-mock never blocks on its output
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not say where it listens within 30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/balance", nil)
		req.SetBasicAuth("sk_test_stripemock", "")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stripe-mock at %s did not answer within 30 s", base)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

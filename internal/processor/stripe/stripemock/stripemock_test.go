package stripemock_test

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/processor/stripe/stripemock"
)

// Start answers the base URL of a stripe-mock that answers.
func TestStart(t *testing.T) {
	t.Parallel()
	if os.Getenv("STRIPEMOCK_MISSING") == "1" {
		stripemock.Start(t)
		return
	}
	base := stripemock.Start(t)
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/payment_intents/pi_123", nil)
	req.SetBasicAuth("sk_test_123", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stripe-mock at %s answered %s", base, resp.Status)
	}
}

// Without stripe-mock a test skips, and fails under KASSA_REQUIRE_ALL=1.
func TestMissing(t *testing.T) {
	t.Parallel()
	for require, want := range map[string]string{"": "--- SKIP: TestStart", "1": "--- FAIL: TestStart"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStart$", "-test.v")
		empty := t.TempDir()
		cmd.Env = append(os.Environ(), "STRIPEMOCK_MISSING=1", "PATH="+empty, "GOBIN="+empty, "KASSA_REQUIRE_ALL="+require)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), want) {
			t.Errorf("KASSA_REQUIRE_ALL=%q: want %q in\n%s", require, want, out)
		}
	}
}

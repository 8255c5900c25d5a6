package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// What Sign signs verifies with the specification's own Go library, under each secret it signed with;
// another secret, or a body changed by one byte, does not.
func TestSignVerifiesWithTheStandardLibrary(t *testing.T) {
	old, cur, other := NewSecret(), NewSecret(), NewSecret()
	if !strings.HasPrefix(cur, "whsec_") || len(cur) != len("whsec_")+44 {
		t.Fatalf("secret %q: want whsec_ and the base64 of 32 bytes", cur)
	}
	body := []byte(`{"type":"transaction.approved","timestamp":"2026-11-26T10:00:00Z","data":{"id":"x"}}`)
	at := time.Now()
	sig, err := Sign([]string{cur, old}, "evt_1", at, body)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(sig)); n != 2 {
		t.Fatalf("signature header %q: want 2 signatures", sig)
	}
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	for _, s := range []string{cur, old} {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("secret %s: %v", s[:10], err)
		}
		changed := append([]byte(nil), body...)
		changed[len(changed)-3] ^= 1
		if wh.Verify(changed, h) == nil {
			t.Error("a body changed by one byte verified")
		}
	}
	wh, _ := standardwebhooks.NewWebhook(other)
	if wh.Verify(body, h) == nil {
		t.Error("another secret verified")
	}
	// The library's own signature of the same message is the one Sign makes.
	lib, _ := standardwebhooks.NewWebhook(cur)
	want, _ := lib.Sign("evt_1", at, body)
	if got, _ := Sign([]string{cur}, "evt_1", at, body); got != want {
		t.Errorf("Sign = %q, the library signs %q", got, want)
	}
}

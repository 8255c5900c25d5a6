package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// 200 password changes at once from one sales session — half of them giving the right current
// password, half a wrong one — and 200 uses at once of one set-password link all hash within the
// server's one password gate: the heap grows by less than 300 MiB (each argon2id computation holds
// 64 MiB), what the gate cannot take at once is refused 429, nothing fails. Not parallel, so that no
// other test's allocations count.
func TestPasswordChangesHashWithinTheGate(t *testing.T) {
	db := storetest.SQLite(t)
	s := newShop(t, db, server.Config{})
	sales := s.browser(t)
	csrf := sales.signIn("sales@maple.example")
	var link user.Link
	if err := db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		link, err = user.IssueLink(context.Background(), tx, s.users[user.Reporting].ID, user.Reset, "", time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	answers := map[string]int{}
	growth := servertest.HeapGrowth(func() {
		servertest.Parallel(400, func(i int) {
			var resp *http.Response
			kind := "change"
			if i%2 == 0 {
				current := pw
				if i%4 == 0 {
					current = "not the password " + strconv.Itoa(i)
				}
				resp, _ = sales.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {current},
					"new_password": {"a new passphrase " + strconv.Itoa(i)}})
			} else {
				kind = "link"
				resp, _ = sales.post("/dashboard/password", url.Values{"token": {link.Token}, "password": {"a fresh passphrase"},
					"confirm": {"a fresh passphrase"}})
			}
			mu.Lock()
			answers[kind+" "+strconv.Itoa(resp.StatusCode)]++
			mu.Unlock()
		})
	})
	t.Logf("answers %v; heap grew by %d MiB at its peak", answers, growth)
	if growth >= 300 {
		t.Errorf("the heap grew by %d MiB, want less than 300", growth)
	}
	for k := range answers {
		if strings.HasSuffix(k, " 500") {
			t.Errorf("answers %v: a failure", answers)
		}
	}
	if answers["change 429"] == 0 || answers["link 429"] == 0 {
		t.Errorf("answers %v: want some of each refused 429 by the gate or the count", answers)
	}
}

// Wrong current passwords on the account page count as failed sign-ins of the user: after
// AccountAttemptLimit of them even the right one is refused 429 with Retry-After, unchecked, for the
// rest of the window; the user's own browser still signs in (it counts apart).
func TestWrongCurrentPasswordsAreCounted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		b := s.browser(t)
		csrf := b.signIn("reporting@maple.example")
		change := func(current string) (*http.Response, string) {
			return b.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {current},
				"new_password": {"a new passphrase"}})
		}
		for i := range 5 {
			resp, body := change("guess number " + strconv.Itoa(i))
			wantStatus(t, "a wrong current password", resp, body, http.StatusBadRequest)
			if !strings.Contains(body, "Your current password is not right.") {
				t.Fatalf("the refusal: %s", body)
			}
		}
		resp, body := change(pw)
		if wait, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || wait < 1 {
			t.Fatalf("the right current password after five wrong ones: %d Retry-After %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if resp, _ := b.get("/dashboard"); resp.StatusCode != http.StatusOK {
			t.Fatalf("the session after the refusals: %d", resp.StatusCode)
		}
		resp, _ = b.post("/dashboard/sign-in", url.Values{"email": {"reporting@maple.example"}, "password": {pw}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the user's own browser signing in after the guesses: %d", resp.StatusCode)
		}
	})
}

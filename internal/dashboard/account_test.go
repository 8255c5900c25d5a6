package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The account page lists the user's sessions and ends one; a password change needs the current
// password, ends every session of the user, and keeps this browser signed in with a new one.
func TestAccountPasswordAndSessions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a, b, c := s.browser(t), s.browser(t), s.browser(t)
		a.signIn("admin@maple.example")
		b.signIn("admin@maple.example")
		c.signIn("admin@maple.example")
		resp, body := a.get("/dashboard/account")
		wantStatus(t, "the account page", resp, body, http.StatusOK)
		ends := regexp.MustCompile(`action="/dashboard/account/sessions/([0-9a-f]{64})/end"`).FindAllStringSubmatch(body, -1)
		if len(ends) != 3 || strings.Count(body, "(this one)") != 1 {
			t.Fatalf("sessions listed: %d, current marked %d times\n%s", len(ends), strings.Count(body, "(this one)"), body)
		}
		// The newest first: c's, then b's.
		csrf := signintest.Field(t, body, "csrf_token")
		resp, body = a.post("/dashboard/account/sessions/"+ends[1][1]+"/end", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "end another session", resp, body, http.StatusOK)
		if resp, _ := b.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the ended session still opens the dashboard: %d", resp.StatusCode)
		}
		if resp, _ := a.get("/dashboard"); resp.StatusCode != http.StatusOK {
			t.Fatalf("ending another session signed this one out: %d", resp.StatusCode)
		}
		resp, body = a.post("/dashboard/account/sessions/"+ends[1][1]+"/end", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "end it again", resp, body, http.StatusNotFound)
		resp, body = a.post("/dashboard/account/sessions/"+strings.Repeat("0", 64)+"/end", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "end an unknown session", resp, body, http.StatusNotFound)

		const fresh = "a brand new passphrase"
		resp, body = a.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {"wrong"}, "new_password": {fresh}})
		wantStatus(t, "a wrong current password", resp, body, http.StatusBadRequest)
		resp, body = a.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {pw}, "new_password": {"short"}})
		wantStatus(t, "a short new password", resp, body, http.StatusBadRequest)
		resp, body = a.post("/dashboard/account/password", url.Values{"csrf_token": {csrf}, "current_password": {pw}, "new_password": {fresh}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/account?password=changed" {
			t.Fatalf("change the password: %d %s", resp.StatusCode, body)
		}
		resp, body = a.get("/dashboard/account?password=changed")
		wantStatus(t, "the account page after the change", resp, body, http.StatusOK)
		if !strings.Contains(body, "Your password is changed") || strings.Count(body, "/end\"") != 1 {
			t.Errorf("after the change: %s", body)
		}
		if resp, _ := c.get("/dashboard"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("a session from before the change still opens: %d", resp.StatusCode)
		}
		if resp, _ := c.post("/dashboard/sign-in", url.Values{"email": {"admin@maple.example"}, "password": {pw}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the old password: %d", resp.StatusCode)
		}
		if resp, _ := c.post("/dashboard/sign-in", url.Values{"email": {"admin@maple.example"}, "password": {fresh}}); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the new password: %d", resp.StatusCode)
		}

		// Ending one's own session signs this browser out.
		_, body = a.get("/dashboard/account")
		own := regexp.MustCompile(`action="/dashboard/account/sessions/([0-9a-f]{64})/end"[^<]*<input[^>]*>\s*<button class="danger" type="submit">Sign out`).FindStringSubmatch(body)
		if own == nil {
			t.Fatalf("no sign-out for this session: %s", body)
		}
		resp, _ = a.post("/dashboard/account/sessions/"+own[1]+"/end", url.Values{"csrf_token": {signintest.Field(t, body, "csrf_token")}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/sign-in" {
			t.Fatalf("end this session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
}

package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// Every dashboard action writes an audit record naming the staff user and the address it came from,
// in the order they happened; another user's actions are its own.
func TestActionsAreAudited(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		owner, admin := s.users[user.Owner], s.users[user.Admin]
		b := s.browser(t)
		csrf := b.signIn(owner.Email)
		resp, body := b.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"new@maple.example"}, "role": {"reporting"}})
		wantStatus(t, "invite", resp, body, http.StatusOK)
		resp, body = b.post("/dashboard/staff/"+admin.ID+"/role", url.Values{"csrf_token": {csrf}, "role": {"sales"}})
		wantStatus(t, "change a role", resp, body, http.StatusSeeOther)
		resp, body = b.post("/dashboard/staff/two-factor", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "two-factor not required", resp, body, http.StatusOK)
		resp, body = b.post("/dashboard/sign-out", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "sign out", resp, body, http.StatusSeeOther)
		s.browser(t).signIn(s.users[user.Reporting].Email)

		var got []audit.Entry
		if err := db.Read(context.Background(), func(q store.Querier) error {
			var err error
			got, err = audit.List(context.Background(), q, s.merchantID, audit.Filter{UserID: owner.ID})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := []struct{ op, resource, detail string }{
			{"session.end", "", ""}, {"merchant.require_two_factor", "", "off"}, {"user.role", "user/" + admin.ID, "role sales"},
			{"user.invite", "", "role reporting"}, {"session.start", "", ""},
		}
		if len(got) != len(want) {
			t.Fatalf("the owner's records: %+v", got)
		}
		for i, w := range want {
			e := got[i]
			if e.Operation != w.op || (w.resource != "" && e.Resource != w.resource) || e.Detail != w.detail || e.UserID != owner.ID ||
				e.Address != "127.0.0.1" || e.MerchantID != s.merchantID {
				t.Errorf("record %d: %+v, want %+v by %s from 127.0.0.1", i, e, w, owner.ID)
			}
		}
		if !regexp.MustCompile(`^user/[0-9a-f]{10}$`).MatchString(got[3].Resource) {
			t.Errorf("the invitation names %q", got[3].Resource)
		}

		// The Activity page: everyone's records by default, one user's or one action's on request; a
		// sales user sees only its own.
		b.signIn(owner.Email)
		resp, body = b.get("/dashboard/activity")
		wantStatus(t, "the activity page", resp, body, http.StatusOK)
		for _, want := range []string{"owner@maple.example", "user.invite", "(role reporting)", "127.0.0.1", "reporting@maple.example"} {
			if !strings.Contains(body, want) {
				t.Errorf("the activity page lacks %q", want)
			}
		}
		_, body = b.get("/dashboard/activity?user=" + s.users[user.Reporting].ID)
		if strings.Count(body, "<tr><td>") != 1 || !strings.Contains(body, "session.start") {
			t.Errorf("the reporting user's activity: %s", body)
		}
		_, body = b.get("/dashboard/activity?action=user.role")
		if strings.Count(body, "<tr><td>") != 1 || !strings.Contains(body, "(role sales)") {
			t.Errorf("role changes: %s", body)
		}
		sales := s.browser(t)
		sales.signIn(s.users[user.Sales].Email)
		_, body = sales.get("/dashboard/activity?user=" + owner.ID)
		if strings.Contains(body, "owner@maple.example") || strings.Count(body, "<tr><td>") != 1 || strings.Contains(body, `id="filter-user"`) {
			t.Errorf("a sales user's activity page shows others': %s", body)
		}
	})
}

package dashboard_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/card/cardtest"
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

// The Activity page is the merchant's one history: an API's sale by its ledger row (no audit record
// written for it), the owner's refund of it at the dashboard once, by its audit record naming the
// owner and the address, and another merchant's sale never. Its CSV export holds the same filter's
// entries, newest first, with the documented columns; a cursor that no page gave is a 400 naming it.
func TestActivityIsOneHistory(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		owner := s.users[user.Owner]
		sale := s.api(t, s.merchantID).must(t, "POST", "/transaction-service/sale", map[string]string{"amount": "12.34", "currency": "CAD",
			"card_number": cardtest.Visa, "card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"}).Str("transaction_id")
		other := s.srv.NewMerchant(t)
		other.Do(t, "POST", "/transaction-service/sale", map[string]string{"amount": "56.78", "currency": "CAD", "card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"})
		b := s.browser(t)
		csrf := b.signIn(owner.Email)
		resp, body := b.post("/dashboard/transactions/"+sale+"/refund", url.Values{"csrf_token": {csrf}, "key": {"k1"}, "amount": {"2.00"},
			"confirm": {"yes"}})
		wantStatus(t, "the refund", resp, body, http.StatusSeeOther)
		var records []string
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT operation || ' ' || COALESCE(user_id, '') FROM audit_log
			WHERE transaction_id IS NOT NULL ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r string
			if err := rows.Scan(&r); err != nil {
				t.Fatal(err)
			}
			records = append(records, r)
		}
		rows.Close()
		if strings.Join(records, ", ") != "refund "+owner.ID {
			t.Errorf("the audit records of money operations: %v, want the owner's refund alone", records)
		}

		_, body = b.get("/dashboard/activity?action=sale")
		if strings.Count(body, "<tr><td>") != 1 || !strings.Contains(body, "API client ") || !strings.Contains(body, "CA$12.34") ||
			!strings.Contains(body, `<a href="/dashboard/transactions/`+sale+`">`) || !strings.Contains(body, "approved") {
			t.Errorf("the API's sale on the Activity page: %s", body)
		}
		_, body = b.get("/dashboard/activity?action=refund")
		if strings.Count(body, "<tr><td>") != 1 || !strings.Contains(body, "owner@maple.example") || !strings.Contains(body, "CA$2.00") ||
			!strings.Contains(body, "127.0.0.1") {
			t.Errorf("the owner's refund, once, on the Activity page: %s", body)
		}
		_, body = b.get("/dashboard/activity")
		if strings.Contains(body, "56.78") {
			t.Errorf("another merchant's sale on the Activity page: %s", body)
		}
		resp, body = b.get("/dashboard/activity?before=12")
		wantStatus(t, "a cursor no page gave", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "link to older activity") {
			t.Errorf("a bad cursor's page: %s", body)
		}

		resp, body = b.get("/dashboard/activity/export.csv?action=" + url.QueryEscape("sale"))
		wantStatus(t, "the export", resp, body, http.StatusOK)
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || strings.Join(recs[0], ",") != "time,source,user_id,user_email,client_id,operation,transaction_id,resource,"+
			"amount,currency,outcome,detail,request_id,address" {
			t.Fatalf("the export of sales: %q", recs)
		}
		if r := recs[1]; r[1] != "ledger" || r[5] != "sale" || r[6] != sale || r[8] != "12.34" || r[9] != "CAD" || r[10] != "APPROVED" || r[4] == "" {
			t.Errorf("the API's sale exported: %q", r)
		}
		_, body = b.get("/dashboard/activity/export.csv")
		recs, _ = csv.NewReader(strings.NewReader(body)).ReadAll()
		var got []string
		for _, r := range recs[1:] {
			got = append(got, r[1]+" "+r[5]+" "+r[3])
		}
		// Newest first: the refund (the owner's), the owner's sign-in, the API's sale; the other
		// merchant's sale nowhere.
		if len(got) != 3 || got[0] != "audit refund owner@maple.example" || got[1] != "audit session.start owner@maple.example" || got[2] != "ledger sale " ||
			strings.Contains(body, "56.78") {
			t.Errorf("the whole export: %q", got)
		}
	})
}

package dashboard_test

import (
	"context"
	"html"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

const emailsPath = "/dashboard/settings/emails"

// Settings → E-mails, on both backends: the merchant's receipts, invoices, reminders and staff
// invitations, each with its status (sent, queued, failed with a short reason), newest first, and a
// preview. No link an e-mail carried (an invitation's, a password reset's, an invoice's payment link)
// is on the page, in a preview, or anywhere in the database's files, before or after sending. A
// person's own password reset and another merchant's e-mails are not listed and their pages are the
// 404 page; only managers open the pages.
func TestEmailsPage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		in := billingtest.StartInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+in.Addr, "kassa@maple.example")
		if err != nil {
			t.Fatal(err)
		}
		s := newShop(t, db, server.Config{NoBillingEngine: true, Billing: billing.Config{Mailer: mailer}})
		owner := s.browser(t)
		csrf := owner.signIn("owner@maple.example")

		resp, body := owner.get(emailsPath)
		wantStatus(t, "no e-mail yet", resp, body, http.StatusOK)
		if !strings.Contains(body, `id="emails-empty"`) {
			t.Fatalf("the empty log: %s", body)
		}

		// An invitation, a reset of the owner's password, an invoice and a receipt, sent.
		resp, body = owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"books@maple.example"}, "role": {"reporting"}})
		wantStatus(t, "invite", resp, body, http.StatusOK)
		resp, body = s.browser(t).post("/dashboard/forgot", url.Values{"email": {"owner@maple.example"}})
		wantStatus(t, "forgot", resp, body, http.StatusOK)
		s.api(t, s.merchantID).invoice(t, true, oneLine("E-1", "CAD", "42.00", "bob@example.com"))
		queue := func(merchantID string, msg billing.Message) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error { return billing.Queue(ctx, tx, merchantID, msg, time.Now()) }); err != nil {
				t.Fatal(err)
			}
		}
		receipt := func(merchantID, to string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				return billing.QueueReceipt(ctx, tx, merchantID, to, nil, billing.Receipt{Merchant: "Maple & Birch Goods", Amount: "CA$9.99",
					Card: "Visa •••• 4242", Date: "2027-01-05", TransactionID: "tr_1"}, time.Now())
			}); err != nil {
				t.Fatal(err)
			}
		}
		receipt(s.merchantID, "ann@example.com")
		secrets := map[string]string{}
		for what, to := range map[string]string{"the invitation's": "books@maple.example", "the reset's": "owner@maple.example"} {
			link := outboxLink(t, db, to)
			u, _ := url.Parse(link)
			secrets[what+" link"], secrets[what+" token"] = link, u.Query().Get("token")
		}
		for _, e := range billingtest.Outbox(t, db) {
			if e.To == "bob@example.com" {
				payLink := regexp.MustCompile(`https?://\S+/invoice/(\S+)/pay`).FindStringSubmatch(e.Text)
				if payLink == nil {
					t.Fatalf("no payment link in the invoice: %q", e.Text)
				}
				secrets["the invoice's payment link"], secrets["the invoice's payment key"] = payLink[0], payLink[1]
			}
		}
		if n, err := s.srv.Billing().Deliver(ctx); n != 4 || err != nil {
			t.Fatalf("Deliver = %d, %v", n, err)
		}

		// A reminder the SMTP server cannot take, and a receipt that waits.
		reminderLink := "https://maple.example/pay/in_reminder?key=" + strconv.FormatInt(time.Now().UnixNano(), 36)
		secrets["the reminder's link"] = reminderLink
		queue(s.merchantID, billing.Message{Kind: billing.KindReminder, To: "bob@example.com", Subject: "Reminder: invoice E-1 is due today",
			Text: "Pay it at " + reminderLink, HTML: `<p>Pay it <a href="` + reminderLink + `">here</a>.</p>`})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		down, err := billing.NewMailer("smtp://"+closed, "kassa@maple.example")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := billing.New(billing.Config{DB: db, Mailer: down}).Deliver(ctx); n != 0 || err != nil {
			t.Fatalf("Deliver to a closed port = %d, %v", n, err)
		}
		receipt(s.merchantID, "cy@example.com")

		// Another merchant's receipt.
		var other string
		if err := db.Write(ctx, func(tx *store.Tx) error {
			m, _, err := user.CreateMerchant(ctx, tx, merchant.New{Name: "Oak Supplies", Email: "owner@oak.example"}, "", time.Now())
			other = m.ID
			return err
		}); err != nil {
			t.Fatal(err)
		}
		receipt(other, "dee@oak.example")

		resp, body = owner.get(emailsPath)
		wantStatus(t, "the log", resp, body, http.StatusOK)
		got := rows(body, "emails")
		for i := range got {
			got[i] = html.UnescapeString(got[i])
		}
		want := []string{
			"Receipt cy@example.com Receipt from Maple & Birch Goods: CA$9.99 Queued",
			"Invoice reminder bob@example.com Reminder: invoice E-1 is due today Failed the mail server could not be reached ; tried again",
			"Receipt ann@example.com Receipt from Maple & Birch Goods: CA$9.99 Sent",
			"Invoice bob@example.com Invoice E-1 from Maple & Birch Goods Sent",
			"Staff invitation books@maple.example You are invited to Maple & Birch Goods on Kassa Sent",
		}
		if len(got) != len(want) {
			t.Fatalf("the log's rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Errorf("row %d: %q, want it to say %q", i, got[i], want[i])
			}
		}
		if strings.Contains(body, "owner@maple.example<") || strings.Contains(body, "Password reset") || strings.Contains(body, "dee@oak.example") {
			t.Errorf("the log shows the owner's password reset or another merchant's e-mail: %s", body)
		}
		ids := map[string]string{} // recipient → the page of its newest e-mail
		for _, m := range regexp.MustCompile(`<td data-label="To">([^<]+)</td>\s*<td data-label="Subject"><a href="(`+emailsPath+`/\d+)"`).FindAllStringSubmatch(body, -1) {
			if ids[m[1]] == "" {
				ids[m[1]] = m[2]
			}
		}
		pages := []string{body}
		for _, to := range []string{"books@maple.example", "bob@example.com", "ann@example.com"} {
			resp, page := owner.get(ids[to])
			wantStatus(t, "the preview of the e-mail to "+to, resp, page, http.StatusOK)
			if !strings.Contains(page, billing.LinkRemoved) && to != "ann@example.com" {
				t.Errorf("the preview of the e-mail to %s does not say its link was removed: %s", to, page)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "script-src") || strings.Contains(csp, "frame-src") {
				t.Errorf("the preview's policy: %s", csp)
			}
			pages = append(pages, page)
		}
		if page := pages[1]; !strings.Contains(page, `<iframe id="email-html" title="The e-mail as its recipient sees it" sandbox="" referrerpolicy="no-referrer" srcdoc="`) ||
			!strings.Contains(page, "You are invited to the Kassa dashboard of Maple &amp;amp; Birch Goods") || !strings.Contains(page, `id="email-text"`) {
			t.Errorf("the invitation's preview: %s", page)
		}
		for i, page := range pages {
			for what, secret := range secrets {
				if strings.Contains(page, secret) || strings.Contains(page, url.QueryEscape(secret)) {
					t.Errorf("page %d shows %s", i, what)
				}
			}
		}
		storetest.NotStored(t, storetest.RawData(t, db), secrets)

		// Who may open the pages, and what they may open.
		admin := s.browser(t)
		admin.signIn("admin@maple.example")
		resp, body = admin.get(emailsPath)
		wantStatus(t, "an admin's log", resp, body, http.StatusOK)
		for _, role := range []string{"reporting", "sales"} {
			b := s.browser(t)
			b.signIn(role + "@maple.example")
			for _, path := range []string{emailsPath, ids["ann@example.com"]} {
				resp, body := b.get(path)
				wantStatus(t, role+" opens "+path, resp, body, http.StatusForbidden)
			}
		}
		var resetID, otherID int64
		for _, e := range billingtest.Outbox(t, db) {
			switch e.To {
			case "owner@maple.example":
				resetID = e.ID
			case "dee@oak.example":
				otherID = e.ID
			}
		}
		for _, id := range []int64{resetID, otherID, 1 << 40} {
			resp, body := owner.get(emailsPath + "/" + strconv.FormatInt(id, 10))
			wantStatus(t, "e-mail "+strconv.FormatInt(id, 10), resp, body, http.StatusNotFound)
		}
		resp, body = owner.get(emailsPath + "?after=x")
		wantStatus(t, "a page that is none", resp, body, http.StatusBadRequest)
	})
}

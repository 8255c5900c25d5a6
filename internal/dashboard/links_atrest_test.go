package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A raw-bytes scan of both databases finds no password link, nor its token, that the dashboard handed
// out: an invitation and a reset, both mailed only. With SMTP
// configured and without, before the outbox sends them and after; and the links work all along, for
// they are the real ones. Sent, the e-mails keep nothing of what they said; unsent, they wait sealed,
// and open to the same links.
func TestPasswordLinksLeaveNoSecretsAtRest(t *testing.T) {
	t.Parallel()
	for _, smtp := range []bool{false, true} {
		name := map[bool]string{false: "without SMTP", true: "with SMTP"}[smtp]
		t.Run(name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				cfg := server.Config{NoBillingEngine: true}
				var in *billingtest.Inbox
				if smtp {
					in = billingtest.StartInbox(t, "127.0.0.1:0")
					mailer, err := billing.NewMailer("smtp://"+in.Addr, "kassa@maple.example")
					if err != nil {
						t.Fatal(err)
					}
					cfg.Billing.Mailer = mailer
				}
				s := newShop(t, db, cfg)
				owner := s.browser(t)
				csrf := owner.signIn("owner@maple.example")
				resp, body := owner.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {"books@maple.example"}, "role": {"reporting"}})
				wantStatus(t, "invite", resp, body, http.StatusOK)
				invite := outboxLink(t, db, "books@maple.example")
				anon := s.browser(t)
				resp, body = anon.post("/dashboard/forgot", url.Values{"email": {"owner@maple.example"}})
				wantStatus(t, "forgot", resp, body, http.StatusOK)
				reset := outboxLink(t, db, "owner@maple.example")
				secrets := map[string]string{}
				for what, link := range map[string]string{"the invitation": invite, "the reset": reset} {
					u, err := url.Parse(link)
					if err != nil {
						t.Fatal(err)
					}
					secrets[what+"'s link"], secrets[what+"'s token"] = link, u.Query().Get("token")
				}
				storetest.NotStored(t, storetest.RawData(t, db), secrets)

				n, err := s.srv.Billing().Deliver(ctx)
				if want := map[bool]int{false: 0, true: 2}[smtp]; n != want || err != nil {
					t.Fatalf("Deliver = %d, %v; want %d", n, err, want)
				}
				storetest.NotStored(t, storetest.RawData(t, db), secrets)
				mails := billingtest.Outbox(t, db)
				if len(mails) != 2 {
					t.Fatalf("%d e-mails in the outbox", len(mails))
				}
				for i, link := range []string{invite, reset} {
					if e := mails[i]; e.Sent != smtp || (smtp && e.Subject+e.Text+e.HTML != "") || (!smtp && !strings.Contains(e.Text, link)) {
						t.Errorf("the e-mail with %s, %s: %+v", link, name, e)
					}
				}
				if smtp {
					received := in.Messages()
					if len(received) != 2 {
						t.Fatalf("%d e-mails received", len(received))
					}
					for i, link := range []string{invite, reset} {
						if _, _, parts := billingtest.Read(t, received[i]); !strings.Contains(parts["text/plain"], link) {
							t.Errorf("the e-mail received lacks %s: %v", link, parts)
						}
					}
				}
				for _, link := range []string{invite, reset} {
					resp, body := anon.get(strings.TrimPrefix(link, s.srv.URL))
					wantStatus(t, "open "+link, resp, body, http.StatusOK)
				}
			})
		})
	}
}

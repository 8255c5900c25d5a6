package store_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// beforeSealedOutbox is the last schema whose outbox kept what its e-mails say in clear.
const beforeSealedOutbox = 53

// The upgrade to a sealed outbox (migration 54): the first server to start seals the e-mail that
// waited in clear and empties the one sent, and no byte of either is left in the database (on
// SQLite, in its free pages or its write-ahead log either). The waiting e-mail still goes out, with
// its link.
func TestUpgradeToSealedOutbox(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeSealedOutbox); err != nil {
				t.Fatal(err)
			}
			waiting := "https://pay.maple.example/dashboard/password?token=" + rand.Text()
			sent := "https://pay.maple.example/dashboard/password?token=" + rand.Text()
			now := time.Now().UnixMilli()
			mustExec(t, db, `INSERT INTO outbox (merchant_id, to_addr, bcc, subject, text_body, html_body, next_attempt, sent_at, created_at)
				VALUES ('aaaaaaaaaa', 'ada@example.com', 'books@example.com', 'Reset', $1, $2, $3, NULL, $3),
				       ('aaaaaaaaaa', 'bob@example.com', '', 'Reset', $4, $5, $3, $3, $3)`,
				"Open "+waiting, `<a href="`+waiting+`">Open</a>`, now, "Open "+sent, `<a href="`+sent+`">Open</a>`)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			in := billingtest.StartInbox(t, "127.0.0.1:0")
			mailer, err := billing.NewMailer("smtp://"+in.Addr, "kassa@maple.example")
			if err != nil {
				t.Fatal(err)
			}
			srv := servertest.Start(t, db, server.Config{NoBillingEngine: true, Billing: billing.Config{Mailer: mailer}})
			storetest.NotStored(t, storetest.RawData(t, db), map[string]string{"the waiting e-mail's link": waiting, "the sent e-mail's link": sent})
			mails := billingtest.Outbox(t, db)
			if len(mails) != 2 || mails[0].Sent || mails[0].Subject != "Reset" || mails[0].Text != "Open "+waiting || mails[0].HTML != `<a href="`+waiting+`">Open</a>` ||
				strings.Join(mails[0].Bcc, ",") != "books@example.com" || !mails[1].Sent || mails[1].Subject+mails[1].Text+mails[1].HTML != "" {
				t.Fatalf("the outbox after the upgrade: %+v", mails)
			}
			if n, err := srv.Billing().Deliver(ctx); n != 1 || err != nil {
				t.Fatalf("Deliver = %d, %v", n, err)
			}
			got := in.Messages()
			if len(got) != 1 {
				t.Fatalf("%d e-mails received", len(got))
			}
			if _, _, parts := billingtest.Read(t, got[0]); parts["text/plain"] != "Open "+waiting {
				t.Fatalf("the e-mail received: %v", parts)
			}
		})
	}
}

// beforeMailLog is the last schema whose outbox kept no kind, preview or demo mark, and the raw error
// of a failed attempt.
const beforeMailLog = 67

// The upgrade to the merchant's log of e-mails (migration 68): an e-mail queued before is listed as
// an e-mail of unknown kind, without a preview, and one whose attempts failed says only that the mail
// server failed: the raw error it kept, which named the server's address, is cleared.
func TestUpgradeToMailLog(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeMailLog); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			raw := "dial tcp 10.9.8.7:25: connect: connection refused"
			mustExec(t, db, `INSERT INTO outbox (merchant_id, to_addr, subject, text_body, html_body, attempts, last_error, next_attempt, created_at)
				VALUES ('aaaaaaaaaa', 'ada@example.com', '', '', '', 2, $1, $2, $2)`, raw, now)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			servertest.Start(t, db, server.Config{NoBillingEngine: true}) // loads the keyring the log opens previews with
			mails, more, err := billing.Mails(ctx, db, "aaaaaaaaaa", 0, 10)
			if err != nil || more || len(mails) != 1 {
				t.Fatalf("Mails = %+v, %v, %v", mails, more, err)
			}
			if m := mails[0]; m.Kind.Label() != "E-mail" || m.Status != billing.MailFailed || m.Reason != "the mail server failed" || m.Preview || m.To != "ada@example.com" {
				t.Fatalf("the e-mail queued before the upgrade: %+v", m)
			}
			var kept int
			if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE last_error <> ''`).Scan(&kept); err != nil || kept != 0 {
				t.Fatalf("%d raw errors kept (%v)", kept, err)
			}
		})
	}
}

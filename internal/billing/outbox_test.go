package billing_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The outbox keeps what an e-mail says sealed, on both backends: the database's files hold neither
// its subject nor its bodies while it waits, the engine opens it to send it, and once sent it keeps
// only its recipients. A message whose recipient was changed in the database does not open, and is
// not sent, to that address or any; put back, it goes to its own.
func TestOutboxKeepsMessagesSealed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		in := billingtest.StartInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+in.Addr, "kassa@maple.example")
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, db, time.Date(2027, time.October, 5, 14, 0, 0, 0, time.UTC), billing.Config{Mailer: mailer})
		secret := func(what string) string { return "https://pay.maple.example/" + what + "/" + rand.Text() }
		subject, text, html, moved := secret("subject"), secret("text"), secret("html"), secret("moved")
		queue := func(to string, msg billing.Message) {
			t.Helper()
			msg.To = to
			if err := db.Write(ctx, func(tx *store.Tx) error { return billing.Queue(ctx, tx, f.m.ID, msg, f.clock.Now()) }); err != nil {
				t.Fatal(err)
			}
		}
		queue("ada@example.com", billing.Message{Kind: billing.KindInvoice, Bcc: []string{"books@example.com"}, Subject: "Your link " + subject,
			Text: "Open " + text, HTML: `<a href="` + html + `">Open</a>`})
		queue("bob@example.com", billing.Message{Kind: billing.KindInvoice, Subject: "Another link", Text: "Open " + moved})
		secrets := map[string]string{"a subject": subject, "a text body": text, "an HTML body": html, "the second message's link": moved}
		storetest.NotStored(t, storetest.RawData(t, db), secrets)

		waiting := billingtest.Outbox(t, db)
		if len(waiting) != 2 || waiting[0].Subject != "Your link "+subject || waiting[0].Text != "Open "+text || waiting[0].HTML != `<a href="`+html+`">Open</a>` ||
			strings.Join(waiting[0].Bcc, ",") != "books@example.com" || waiting[0].Sent {
			t.Fatalf("the outbox, opened: %+v", waiting)
		}

		// Whoever can write to the database sends the second message to an address of theirs.
		if _, err := db.Exec(ctx, `UPDATE outbox SET to_addr = 'mallory@example.com' WHERE id = $1`, waiting[1].ID); err != nil {
			t.Fatal(err)
		}
		if n, err := f.eng.Deliver(ctx); n != 1 || err != nil {
			t.Fatalf("Deliver = %d, %v", n, err)
		}
		msgs := in.Messages()
		if len(msgs) != 1 || strings.Join(msgs[0].Rcpt, ",") != "ada@example.com,books@example.com" {
			t.Fatalf("received: %+v", msgs)
		}
		_, gotSubject, parts := billingtest.Read(t, msgs[0])
		if gotSubject != "Your link "+subject || !strings.Contains(parts["text/plain"], text) || !strings.Contains(parts["text/html"], html) {
			t.Fatalf("the e-mail sent says %q, %v", gotSubject, parts)
		}
		if _, err := db.Exec(ctx, `UPDATE outbox SET to_addr = 'bob@example.com' WHERE id = $1`, waiting[1].ID); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Minute)
		if n, err := f.eng.Deliver(ctx); n != 1 || err != nil {
			t.Fatalf("Deliver of the message put back = %d, %v", n, err)
		}
		if msgs := in.Messages(); len(msgs) != 2 || strings.Join(msgs[1].Rcpt, ",") != "bob@example.com" {
			t.Fatalf("received: %+v", msgs)
		}

		storetest.NotStored(t, storetest.RawData(t, db), secrets)
		for _, e := range billingtest.Outbox(t, db) {
			if !e.Sent || e.Subject != "" || e.Text != "" || e.HTML != "" {
				t.Fatalf("a sent message keeps what it said: %+v", e)
			}
		}
		var sealed int
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE sealed IS NOT NULL`).Scan(&sealed); err != nil || sealed != 0 {
			t.Fatalf("%d sent messages keep their sealed content (%v)", sealed, err)
		}
	})
}

// Without the keyring loaded, nothing can be queued: the e-mail is not written in clear instead.
func TestQueueNeedsTheKeyring(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	ctx := context.Background()
	err := db.Write(ctx, func(tx *store.Tx) error {
		return billing.Queue(ctx, tx, "M1", billing.Message{Kind: billing.KindReceipt, To: "ada@example.com", Subject: "s", Text: "t", HTML: "h"}, time.Now())
	})
	if !errors.Is(err, store.ErrNoSealer) {
		t.Fatalf("Queue without a keyring: %v", err)
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d messages queued (%v)", n, err)
	}
}

// In demo mode, without a mailer, the engine records what waits as not sent: emptied as a sent message
// is, shown by the merchant's log with its preview, and not warned of as waiting. A person's own
// e-mail is recorded alike, and left out of the merchant's log.
func TestDemoModeRecordsEmails(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db, time.Date(2027, time.October, 5, 14, 0, 0, 0, time.UTC), billing.Config{Demo: true})
		link := "https://kassa.example/dashboard/password?token=" + rand.Text()
		for _, kind := range []billing.Kind{billing.KindInvitation, billing.KindPasswordReset} {
			msg := billing.Message{Kind: kind, To: "ada@example.com", Subject: "Join us", Text: "Open " + link}
			if err := db.Write(ctx, func(tx *store.Tx) error { return billing.Queue(ctx, tx, f.m.ID, msg, f.clock.Now()) }); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := f.eng.Deliver(ctx); n != 0 || err != nil {
			t.Fatalf("Deliver in demo mode = %d, %v", n, err)
		}
		for _, e := range billingtest.Outbox(t, db) {
			if !e.Sent || e.Subject+e.Text+e.HTML != "" {
				t.Fatalf("a message recorded in demo mode keeps what it said: %+v", e)
			}
		}
		mails, more, err := billing.Mails(ctx, db, f.m.ID, 0, 10)
		if err != nil || more || len(mails) != 1 {
			t.Fatalf("Mails = %+v, %v, %v", mails, more, err)
		}
		if m := mails[0]; m.Status != billing.MailDemo || m.Kind != billing.KindInvitation || !m.Preview || m.Subject != "Join us" ||
			m.Text != "Open "+billing.LinkRemoved || m.Sent.IsZero() {
			t.Fatalf("the invitation in the log: %+v", m)
		}
		storetest.NotStored(t, storetest.RawData(t, db), map[string]string{"the link": link})
	})
}

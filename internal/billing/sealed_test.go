package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// An e-mail queued sealed (QueueSealed), on both backends: the outbox holds its subject and address
// but its bodies only sealed, so the database holds no byte of the link it carries; an engine without
// the keyring cannot send it and leaves it waiting, and the engine with it sends the bodies as they
// were written. The sealed bodies open only for their own recipient.
func TestSealedMail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		kek, err := envelope.ParseKEK(envelope.NewKEKText())
		if err != nil {
			t.Fatal(err)
		}
		ring, err := envelope.NewKeyring(ctx, db, kek, nil)
		if err != nil {
			t.Fatal(err)
		}
		in := billingtest.StartInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+in.Addr, "Maple Goods <billing@maple.example>")
		if err != nil {
			t.Fatal(err)
		}
		const link = "https://pay.example/invoice/SECRETKEYSECRETKEYSECRETKE/pay"
		msg := billing.Message{To: "payer@example.com", Subject: "Invoice 7 from Maple Goods", Text: "Pay here: " + link,
			HTML: `<a href="` + link + `">Pay</a>`}
		now := time.Now()
		if err := db.Write(ctx, func(tx *store.Tx) error { return billing.QueueSealed(ctx, tx, ring, "m1", msg, now) }); err != nil {
			t.Fatal(err)
		}
		var text, html string
		var sealed []byte
		if err := db.Reader().QueryRowContext(ctx, `SELECT text_body, html_body, sealed_body FROM outbox WHERE to_addr = $1`, msg.To).
			Scan(&text, &html, &sealed); err != nil {
			t.Fatal(err)
		}
		if text != "" || html != "" || len(sealed) == 0 {
			t.Fatalf("the outbox row: text %q, html %q, %d sealed bytes", text, html, len(sealed))
		}
		storetest.NotStored(t, storetest.RawData(t, db), map[string]string{"the e-mail's link": link})
		if _, _, err := billing.Unseal(ring, "m1", "someone-else@example.com", sealed); err == nil {
			t.Fatal("the sealed bodies opened for another recipient")
		}

		if n, err := billing.New(billing.Config{DB: db, Mailer: mailer, Now: func() time.Time { return now }}).Deliver(ctx); err != nil || n != 0 {
			t.Fatalf("an engine without the keyring: sent %d (%v)", n, err)
		}
		later := now.Add(time.Hour)
		eng := billing.New(billing.Config{DB: db, Mailer: mailer, Keyring: ring, Now: func() time.Time { return later }})
		if n, err := eng.Deliver(ctx); err != nil || n != 1 {
			t.Fatalf("the engine with the keyring: sent %d (%v)", n, err)
		}
		msgs := in.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d e-mails received", len(msgs))
		}
		_, subject, parts := billingtest.Read(t, msgs[0])
		if subject != msg.Subject || !strings.Contains(parts["text/plain"], msg.Text) || !strings.Contains(parts["text/html"], link) {
			t.Fatalf("the e-mail received: %q %v", subject, parts)
		}
	})
}

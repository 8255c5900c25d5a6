package billing_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/metrics/metricstest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Receipts of subscription charges go through the outbox to the SMTP server: to the subscription's
// e-mail, its customer's bcc addresses hidden; each says the merchant, amount, masked card, date,
// transaction and description, and (the shop being on the simulator) that no money moved. Its HTML
// carries the merchant's branding: the logo by its absolute URL, the accent on the title.
func TestReceipts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		in := billingtest.StartInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+in.Addr, "Maple Goods <receipts@maple.example>")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Date(2027, time.October, 5, 14, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{Mailer: mailer})
		var tiny bytes.Buffer
		png.Encode(&tiny, image.NewGray(image.Rect(0, 0, 4, 2)))
		logo, err := branding.Logo(tiny.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var brand branding.Branding
		ctx := context.Background()
		if err := db.Write(ctx, func(tx *store.Tx) error {
			if err := branding.SetLogo(ctx, tx, f.m.ID, logo, start); err != nil {
				return err
			}
			if err := branding.SetAccent(ctx, tx, f.m.ID, "#0b5394", start); err != nil {
				return err
			}
			brand, err = branding.Get(ctx, tx, f.m.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		receipted := f.plan(t, map[string]any{"name": "With receipt", "amount": "42.50", "frequency": "MONTHLY", "send_receipt": true})
		silent := f.plan(t, map[string]any{"name": "Without", "amount": "1.00", "frequency": "MONTHLY"})
		c, _ := f.customer(t, cardtest.Visa)
		f.subscribe(t, c, map[string]any{"plan_lookup_id": receipted, "email": "payer@example.com", "description": "Coffee club"})
		f.subscribe(t, c, map[string]any{"plan_lookup_id": silent})
		if n := f.run(t); n != 2 {
			t.Fatalf("charged %d", n)
		}
		if n, err := f.eng.Deliver(context.Background()); err != nil || n != 1 {
			t.Fatalf("Deliver = %d, %v", n, err)
		}
		msgs := in.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d messages received", len(msgs))
		}
		got := msgs[0]
		if got.From != "receipts@maple.example" || strings.Join(got.Rcpt, ",") != "payer@example.com,books@example.com" {
			t.Fatalf("envelope from %s to %v", got.From, got.Rcpt)
		}
		msg, subj, parts := billingtest.Read(t, got)
		if msg.Header.Get("To") != "payer@example.com" || msg.Header.Get("Bcc") != "" || strings.Contains(string(got.Data), "books@example.com") {
			t.Fatalf("headers: %v (Bcc must not show)", msg.Header)
		}
		// The fixture's shop is on the simulator: its receipts say that no money moved.
		if subj != "Receipt from Test Shop: CA$42.50 (Test payment — no money moved)" {
			t.Fatalf("subject %q", subj)
		}
		var txID string
		for _, e := range f.must(t, "GET", "/transaction-service/transaction?min_amount=42.50", nil).Body["entities"].([]any) {
			txID = e.(map[string]any)["transaction_id"].(string)
		}
		for _, typ := range []string{"text/plain", "text/html"} {
			body := parts[typ]
			for _, want := range []string{"Test payment — no money moved", "Test Shop", "CA$42.50", "VISA ending in 4242", "October 5, 2027", txID, "Coffee club"} {
				if !strings.Contains(body, want) {
					t.Errorf("%s part lacks %q:\n%s", typ, want, body)
				}
			}
			cardtest.Check(t, "the receipt", body)
		}
		if html := parts["text/html"]; !strings.Contains(html, `<img src="`+f.srv.URL+brand.LogoPath()+`"`) || !strings.Contains(html, "color: #0b5394") {
			t.Errorf("the receipt's HTML lacks the merchant's logo or accent:\n%s", html)
		}
		if s, _ := billing.Status(context.Background(), db, f.clock.Now()); s.OutboxBacklog != 0 {
			t.Fatalf("outbox backlog %d after delivery", s.OutboxBacklog)
		}
	})
}

// An SMTP outage delays receipts and loses none: they wait in the outbox and go out, once, when the
// server is back.
func TestReceiptsSurviveAnSMTPOutage(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens here yet: the server is down
	mailer, _ := billing.NewMailer("smtp://"+addr, "receipts@maple.example")
	start := time.Date(2027, time.October, 5, 14, 0, 0, 0, time.UTC)
	set := metrics.New()
	f := newFixture(t, db, start, billing.Config{Mailer: mailer, Metrics: set})
	p := f.plan(t, map[string]any{"name": "Daily", "amount": "2.00", "frequency": "DAILY", "send_receipt": "true"})
	c, _ := f.customer(t, cardtest.Mastercard)
	f.subscribe(t, c, map[string]any{"plan_lookup_id": p})
	f.run(t)
	for range 3 {
		if n, _ := f.eng.Deliver(context.Background()); n != 0 {
			t.Fatal("sent while the server was down")
		}
		f.clock.Advance(20 * time.Minute)
	}
	if s, _ := billing.Status(context.Background(), db, f.clock.Now()); s.OutboxBacklog != 1 {
		t.Fatalf("status during the outage: %+v", s)
	}
	in := billingtest.StartInbox(t, addr)
	f.clock.Advance(time.Hour)
	if n, err := f.eng.Deliver(context.Background()); n != 1 || err != nil {
		t.Fatalf("after the outage: %d, %v", n, err)
	}
	f.clock.Advance(2 * time.Hour)
	f.eng.Deliver(context.Background())
	if msgs := in.Messages(); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	// The engine's metrics count the cycle it charged and each attempt to send the receipt.
	exposition := httptest.NewServer(set.Handler(slog.Default()))
	defer exposition.Close()
	got := metricstest.Scrape(t, exposition.URL)
	for _, w := range []struct {
		name, label, value string
		want               float64
	}{
		{"kassa_billing_charges_total", "result", "approved", 1},
		{"kassa_billing_charges_total", "result", "declined", 0},
		{"kassa_outbox_sends_total", "result", "failed", 3},
		{"kassa_outbox_sends_total", "result", "sent", 1},
	} {
		if n := got.Value(w.name, map[string]string{w.label: w.value}); n != w.want {
			t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.value, n, w.want)
		}
	}
}

package billing_test

import (
	"context"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/metrics/metricstest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// inbox is a real SMTP server (go-smtp) that keeps what it receives.
type inbox struct {
	mu   sync.Mutex
	msgs []received
	srv  *smtp.Server
	ln   net.Listener
	addr string
}

type received struct {
	from string
	rcpt []string
	data []byte
}

type session struct {
	in  *inbox
	cur received
}

func (s *session) Reset()                                      { s.cur = received{} }
func (s *session) Logout() error                               { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.cur.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.rcpt = append(s.cur.rcpt, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = b
	s.in.mu.Lock()
	s.in.msgs = append(s.in.msgs, s.cur)
	s.in.mu.Unlock()
	return nil
}

// startInbox listens on addr ("127.0.0.1:0" for a free port).
func startInbox(t *testing.T, addr string) *inbox {
	t.Helper()
	in := &inbox{}
	in.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{in: in}, nil }))
	in.srv.Domain = "localhost"
	in.srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	in.ln, in.addr = ln, ln.Addr().String()
	go in.srv.Serve(ln)
	t.Cleanup(func() { in.srv.Close() })
	return in
}

func (in *inbox) all() []received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]received(nil), in.msgs...)
}

func TestReceipts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		in := startInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+in.addr, "Maple Goods <receipts@maple.example>")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Date(2027, time.October, 5, 14, 0, 0, 0, time.UTC)
		f := newFixture(t, db, start, billing.Config{Mailer: mailer})
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
		msgs := in.all()
		if len(msgs) != 1 {
			t.Fatalf("%d messages received", len(msgs))
		}
		got := msgs[0]
		if got.from != "receipts@maple.example" || strings.Join(got.rcpt, ",") != "payer@example.com,books@example.com" {
			t.Fatalf("envelope from %s to %v", got.from, got.rcpt)
		}
		msg, err := mail.ReadMessage(strings.NewReader(string(got.data)))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Header.Get("To") != "payer@example.com" || msg.Header.Get("Bcc") != "" || strings.Contains(string(got.data), "books@example.com") {
			t.Fatalf("headers: %v (Bcc must not show)", msg.Header)
		}
		if subj, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); subj != "Receipt from Test Shop: 42.50 CAD" {
			t.Fatalf("subject %q", subj)
		}
		parts := readParts(t, msg)
		var txID string
		for _, e := range f.must(t, "GET", "/transaction-service/transaction?min_amount=42.50", nil).Body["entities"].([]any) {
			txID = e.(map[string]any)["transaction_id"].(string)
		}
		for _, typ := range []string{"text/plain", "text/html"} {
			body := parts[typ]
			for _, want := range []string{"Test Shop", "42.50", "CAD", "VISA ending in 4242", "October 5, 2027", txID, "Coffee club"} {
				if !strings.Contains(body, want) {
					t.Errorf("%s part lacks %q:\n%s", typ, want, body)
				}
			}
			cardtest.Check(t, "the receipt", body)
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
	in := startInbox(t, addr)
	f.clock.Advance(time.Hour)
	if n, err := f.eng.Deliver(context.Background()); n != 1 || err != nil {
		t.Fatalf("after the outage: %d, %v", n, err)
	}
	f.clock.Advance(2 * time.Hour)
	f.eng.Deliver(context.Background())
	if msgs := in.all(); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	// Issue 19, point 1: the engine counts the cycle it charged and each attempt to send the receipt.
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

// readParts returns the parts of a multipart/alternative message by content type.
func readParts(t *testing.T, msg *mail.Message) map[string]string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q", msg.Header.Get("Content-Type"))
	}
	out := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p) // the multipart reader undoes quoted-printable
		typ, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		out[typ] = string(b)
	}
}

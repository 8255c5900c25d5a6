// Package billingtest gives tests a real SMTP server (go-smtp) that keeps what it receives, for the
// billing engine's mailer to deliver the outbox to, and reads back the messages it kept; and reads
// the outbox itself, opened.
package billingtest

import (
	"context"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/store"
)

// Outbox is every message of db's outbox, oldest first, opened with the database's keyring (which a
// server loads, or envelope.NewKeyring): what a message still waiting will say, and of a sent one only
// its recipients.
func Outbox(t testing.TB, db *store.DB) []billing.Entry {
	t.Helper()
	all, err := billing.Entries(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// Inbox is a real SMTP server that keeps the messages it receives.
type Inbox struct {
	// Addr is the address it listens on, host:port.
	Addr string
	mu   sync.Mutex
	msgs []Received
	srv  *smtp.Server
}

// Received is one message as the server received it: the envelope and the raw message.
type Received struct {
	From string
	Rcpt []string
	Data []byte
}

type session struct {
	in  *Inbox
	cur Received
}

func (s *session) Reset()                                      { s.cur = Received{} }
func (s *session) Logout() error                               { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.cur.From = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.Rcpt = append(s.cur.Rcpt, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.Data = b
	s.in.mu.Lock()
	s.in.msgs = append(s.in.msgs, s.cur)
	s.in.mu.Unlock()
	return nil
}

// StartInbox listens on addr ("127.0.0.1:0" for a free port) until t ends.
func StartInbox(t testing.TB, addr string) *Inbox {
	t.Helper()
	in := &Inbox{}
	in.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{in: in}, nil }))
	in.srv.Domain = "localhost"
	in.srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	in.Addr = ln.Addr().String()
	go in.srv.Serve(ln)
	t.Cleanup(func() { in.srv.Close() })
	return in
}

// Messages are the messages received so far, oldest first.
func (in *Inbox) Messages() []Received {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Received(nil), in.msgs...)
}

// Read parses a received message: its headers, its decoded Subject, and its parts by content type
// (Parts).
func Read(t testing.TB, r Received) (*mail.Message, string, map[string]string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(string(r.Data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("subject %q: %v", msg.Header.Get("Subject"), err)
	}
	return msg, subject, Parts(t, msg)
}

// Parts returns the parts of a multipart/alternative message by content type, decoded.
func Parts(t testing.TB, msg *mail.Message) map[string]string {
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

package billing

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// Message is an e-mail with a text and an HTML body. Bcc recipients receive it without appearing in
// its headers.
type Message struct {
	// Kind is what the e-mail is about; Queue refuses a message without one.
	Kind    Kind
	To      string
	Bcc     []string
	Subject string
	Text    string
	HTML    string
}

// Mailer sends e-mail through an SMTP server.
type Mailer struct {
	addr string
	from string
	auth smtp.Auth
}

// NewMailer reads an SMTP URL, smtp://user:pass@host:port (user and password optional; port 587 by
// default), and the From address of the messages. net/smtp upgrades to TLS when the server offers
// STARTTLS, and sends a password only over TLS or to a server on this host.
func NewMailer(rawURL, from string) (*Mailer, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
		return nil, errors.New("billing: the SMTP URL must look like smtp://user:password@host:port")
	}
	if _, err := mail.ParseAddress(from); err != nil {
		return nil, errors.New("billing: the From address of receipts is not an e-mail address")
	}
	port := u.Port()
	if port == "" {
		port = "587"
	}
	m := &Mailer{addr: net.JoinHostPort(u.Hostname(), port), from: from}
	if u.User != nil {
		pass, _ := u.User.Password()
		m.auth = smtp.PlainAuth("", u.User.Username(), pass, u.Hostname())
	}
	return m, nil
}

// Send sends msg.
func (m *Mailer) Send(msg Message) error {
	from, _ := mail.ParseAddress(m.from)
	return smtp.SendMail(m.addr, m.auth, from.Address, append([]string{msg.To}, msg.Bcc...), m.build(msg, time.Now()))
}

// build writes msg as a MIME multipart/alternative message.
func (m *Mailer) build(msg Message, now time.Time) []byte {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", m.from)
	h("To", msg.To)
	h("Subject", mime.QEncoding.Encode("utf-8", msg.Subject))
	h("Date", now.Format(time.RFC1123Z))
	h("Message-ID", "<"+strings.ToLower(rand.Text())+"@kassa>")
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	b.WriteString("\r\n")
	for _, part := range []struct{ typ, body string }{{"text/plain", msg.Text}, {"text/html", msg.HTML}} {
		w, _ := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":              {part.typ + "; charset=utf-8"},
			"Content-Transfer-Encoding": {"quoted-printable"},
		})
		qp := quotedprintable.NewWriter(w)
		qp.Write([]byte(part.body))
		qp.Close()
	}
	mw.Close()
	return b.Bytes()
}

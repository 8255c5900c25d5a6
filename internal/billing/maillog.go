package billing

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"regexp"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// The outbox is also the merchant's log of the e-mails Kassa sent or queued for it (Mails): what each
// is about, to whom, when, how it went, and a preview. The preview is what the message says with
// every link replaced by LinkRemoved, made when the message is queued and sealed like the message
// (previewAAD): a link in an e-mail may be a bearer secret (a password link, an invoice's payment
// link, a webhook URL), and the log must show none of them, to those who open it or to whoever
// copies the database. It stays once the message is sent, when the message itself is emptied.
// Removing every link, not only those known to be secrets, is what keeps a new kind of e-mail from
// leaking one through the log.

// Kind is what an e-mail is about.
type Kind string

// The kinds of e-mail Kassa sends. A password reset and an account notice (a changed two-factor
// method) are a person's own, not their merchant's: the merchant's log leaves them out (personal).
const (
	KindReceipt       Kind = "receipt"
	KindInvoice       Kind = "invoice"
	KindReminder      Kind = "reminder"
	KindInvitation    Kind = "invitation"
	KindWebhookNotice Kind = "webhook_notice"
	KindPasswordReset Kind = "password_reset"
	KindAccountNotice Kind = "account_notice"
)

var kindLabels = map[Kind]string{
	KindReceipt: "Receipt", KindInvoice: "Invoice", KindReminder: "Invoice reminder", KindInvitation: "Staff invitation",
	KindWebhookNotice: "Webhook notice", KindPasswordReset: "Password reset", KindAccountNotice: "Account notice",
}

func (k Kind) known() bool { return kindLabels[k] != "" }

// personal are the kinds of e-mail that are a person's own business rather than their merchant's.
var personal = []Kind{KindPasswordReset, KindAccountNotice}

// Label is the kind in words; "E-mail" for a message queued before Kassa recorded kinds.
func (k Kind) Label() string {
	if l := kindLabels[k]; l != "" {
		return l
	}
	return "E-mail"
}

// LinkRemoved is what a preview says in place of each link of the message.
const LinkRemoved = "[link removed]"

// links matches what a preview removes: every http(s) URL, in text, in an attribute or in a subject,
// up to the first character that ends a URL in text or in HTML.
var links = regexp.MustCompile(`(?i)\bhttps?:(//|&#47;&#47;|&#x2f;&#x2f;)[^\s"'<>]*`)

// preview is what msg says with every link removed.
func preview(msg Message) content {
	cut := func(s string) string { return links.ReplaceAllLiteralString(s, LinkRemoved) }
	return content{Subject: cut(msg.Subject), Text: cut(msg.Text), HTML: cut(msg.HTML)}
}

// previewAAD binds a sealed preview to its merchant and its recipients, apart from the message's
// own seal (contentAAD), so that neither opens as the other.
func previewAAD(merchantID, to, bcc string) []byte {
	return []byte("kassa outbox preview\x00" + merchantID + "\x00" + to + "\x00" + bcc)
}

func sealPreview(s store.Sealer, merchantID, to, bcc string, msg Message) []byte {
	plain, _ := json.Marshal(preview(msg)) // strings always marshal
	return s.Seal(plain, previewAAD(merchantID, to, bcc))
}

// errDoesNotOpen is a message the outbox cannot open to send.
var errDoesNotOpen = errors.New("billing: the message does not open")

// failureReason is what the log says of a failed attempt to send: a short phrase, never the error
// itself, which may carry the SMTP server's address or its own words about the recipient.
func failureReason(err error) string {
	var proto *textproto.Error
	var tlsErr *tls.CertificateVerificationError
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, errDoesNotOpen):
		return "the message does not open: damaged, or its recipients were changed in the database"
	case errors.As(err, &proto) && (proto.Code == 530 || proto.Code == 534 || proto.Code == 535):
		return fmt.Sprintf("the mail server refused Kassa's sign-in (SMTP %d)", proto.Code)
	case errors.As(err, &proto) && proto.Code >= 500:
		return fmt.Sprintf("the mail server refused the message (SMTP %d)", proto.Code)
	case errors.As(err, &proto):
		return fmt.Sprintf("the mail server deferred the message (SMTP %d)", proto.Code)
	case errors.As(err, &tlsErr):
		return "the mail server's TLS certificate is not trusted"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "the mail server did not answer in time"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "the mail server could not be reached"
	}
	return "the mail server failed"
}

// MailStatus is how an e-mail of the log stands.
type MailStatus string

// An e-mail is queued until it is sent, failed while its last attempt failed (it is tried again), and
// not sent in demo mode when a server without SMTP recorded it instead of sending it.
const (
	MailQueued MailStatus = "queued"
	MailSent   MailStatus = "sent"
	MailFailed MailStatus = "failed"
	MailDemo   MailStatus = "demo"
)

// Mail is an e-mail of a merchant's log: what it is, how it went, and its preview (subject, text and
// HTML with every link removed; empty, with Preview false, for a message queued before Kassa kept
// previews, and for one whose preview does not open, Damaged: its merchant or recipients were changed
// in the database, or its seal was).
type Mail struct {
	ID                  int64
	Kind                Kind
	To                  string
	Status              MailStatus
	Reason              string // why the last attempt failed, a short phrase; "" unless failed
	Created             time.Time
	Sent                time.Time // when it was sent or recorded in demo mode; zero while queued
	Retry               time.Time // when a failed one is tried again
	Preview             bool
	Damaged             bool
	Subject, Text, HTML string
}

// mailColumns are the columns Mail reads, in scanMail's order.
const mailColumns = `id, merchant_id, to_addr, bcc, kind, preview, demo, last_error, attempts, next_attempt, sent_at, created_at`

// merchantMails are the outbox rows of a merchant's log: its own e-mails, not a person's (personal).
var merchantMails = func() string {
	kinds := make([]string, len(personal))
	for i, k := range personal {
		kinds[i] = "'" + string(k) + "'"
	}
	return `FROM outbox WHERE merchant_id = $1 AND kind NOT IN (` + strings.Join(kinds, ", ") + `)`
}()

func scanMail(rows *sql.Rows, s store.Sealer) (Mail, error) {
	var m Mail
	var merchantID, bcc, kind, reason string
	var sealed []byte
	var demo bool
	var attempts int
	var next, created int64
	var sent sql.NullInt64
	if err := rows.Scan(&m.ID, &merchantID, &m.To, &bcc, &kind, &sealed, &demo, &reason, &attempts, &next, &sent, &created); err != nil {
		return Mail{}, err
	}
	m.Kind, m.Created = Kind(kind), time.UnixMilli(created)
	switch {
	case sent.Valid && demo:
		m.Status, m.Sent = MailDemo, time.UnixMilli(sent.Int64)
	case sent.Valid:
		m.Status, m.Sent = MailSent, time.UnixMilli(sent.Int64)
	case attempts > 0:
		m.Status, m.Reason, m.Retry = MailFailed, reason, time.UnixMilli(next)
		if m.Reason == "" {
			m.Reason = "the mail server failed"
		}
	default:
		m.Status = MailQueued
	}
	if sealed == nil {
		return m, nil
	}
	// A preview that does not open is shown as damaged, not as an error of the whole log.
	plain, err := s.Open(sealed, previewAAD(merchantID, m.To, bcc))
	var c content
	if err == nil {
		err = json.Unmarshal(plain, &c)
	}
	if err != nil {
		m.Damaged = true
		return m, nil
	}
	m.Preview, m.Subject, m.Text, m.HTML = true, c.Subject, c.Text, c.HTML
	return m, nil
}

// Mails is a page of the merchant's log of e-mails, newest first: at most limit of those older than
// the e-mail olderThan (from the newest when it is 0), and whether there are older ones still. A
// person's own e-mails (personal) are not in it.
func Mails(ctx context.Context, db *store.DB, merchantID string, olderThan int64, limit int) ([]Mail, bool, error) {
	if olderThan <= 0 {
		olderThan = 1<<63 - 1
	}
	out, err := readMails(ctx, db, `SELECT `+mailColumns+` `+merchantMails+` AND id < $2 ORDER BY id DESC LIMIT $3`, merchantID, olderThan, limit+1)
	if len(out) > limit {
		return out[:limit], true, err
	}
	return out, false, err
}

// MailOf is one e-mail of the merchant's log; found false when the merchant has no such e-mail
// (another merchant's, a person's own, or none).
func MailOf(ctx context.Context, db *store.DB, merchantID string, id int64) (Mail, bool, error) {
	out, err := readMails(ctx, db, `SELECT `+mailColumns+` `+merchantMails+` AND id = $2`, merchantID, id)
	if err != nil || len(out) == 0 {
		return Mail{}, false, err
	}
	return out[0], true, nil
}

func readMails(ctx context.Context, db *store.DB, query string, args ...any) ([]Mail, error) {
	sealer, err := db.Sealer()
	if err != nil {
		return nil, err
	}
	var out []Mail
	err = db.Read(ctx, func(q store.Querier) error {
		out = out[:0]
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanMail(rows, sealer)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	return out, err
}

// recordDemo records every message that waits as not sent, in demo mode: it is emptied as a sent one
// is (its preview stays), and the log shows it so.
func (e *Engine) recordDemo(ctx context.Context) error {
	r, err := e.db.Exec(ctx, `UPDATE outbox SET sent_at = $1, demo = TRUE, lease_until = NULL,
		sealed = NULL, subject = '', text_body = '', html_body = '' WHERE sent_at IS NULL`, e.now().UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n > 0 {
		e.log.InfoContext(ctx, "e-mails not sent: demo mode, without an SMTP server; the dashboard shows them under Settings → E-mails", "recorded", n)
	}
	return nil
}

package billing

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// The outbox keeps each e-mail until it is sent. What a message says — its subject and its bodies —
// is sealed under the database's envelope keyring (store.DB.Sealer) when it is queued, and opened
// only to be sent: password links, invoices' payment links and webhook URLs are bearer secrets, and
// whoever copies the database or a backup of it must not find them there. A sent message keeps none
// of it. Its recipients stay in clear, and are bound to what is sealed: a message whose merchant or
// recipients were changed in the database does not open, so that nobody who can write to the
// database sends someone's password link to an address of their choosing.

// content is what a message says, as it is sealed.
type content struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
}

// contentAAD binds a sealed message to its merchant and its recipients.
func contentAAD(merchantID, to, bcc string) []byte {
	return []byte("kassa outbox message\x00" + merchantID + "\x00" + to + "\x00" + bcc)
}

// seal seals what msg says, for the merchant and the recipients it is queued with.
func seal(s store.Sealer, merchantID, to, bcc string, msg Message) []byte {
	plain, _ := json.Marshal(content{Subject: msg.Subject, Text: msg.Text, HTML: msg.HTML}) // strings always marshal
	return s.Seal(plain, contentAAD(merchantID, to, bcc))
}

// Queue puts an e-mail about the merchant in the outbox, in the caller's transaction, sealed with the
// sealer the transaction reaches (an error when no keyring was loaded: nothing is queued in clear).
// The billing engine's Deliver sends it at least once, retrying while the SMTP server fails, and
// without a mailer it waits there, sealed. Receipts, invoices, the dashboard's password links and
// the notices of disabled webhooks go this way. msg must say what it is about (Kind): the merchant's
// log of its e-mails (Mails) keeps, beside it, its preview, sealed too, in which no link is left.
func Queue(ctx context.Context, tx *store.Tx, merchantID string, msg Message, now time.Time) error {
	if !msg.Kind.known() {
		return fmt.Errorf("billing: an e-mail of unknown kind %q is not queued", msg.Kind)
	}
	sealer, err := tx.Sealer()
	if err != nil {
		return err
	}
	bcc := strings.Join(msg.Bcc, ",")
	_, err = tx.ExecContext(ctx, `INSERT INTO outbox (merchant_id, to_addr, bcc, subject, text_body, html_body, sealed, kind, preview, next_attempt, created_at)
		VALUES ($1, $2, $3, '', '', '', $4, $5, $6, $7, $7)`, merchantID, msg.To, bcc, seal(sealer, merchantID, msg.To, bcc, msg),
		string(msg.Kind), sealPreview(sealer, merchantID, msg.To, bcc, msg), now.UnixMilli())
	return err
}

// queued is a row of the outbox.
type queued struct {
	id                  int64
	merchantID, to, bcc string
	sealed              []byte
	// subject, text and html are what a message queued before the outbox sealed them says in
	// clear, until SealOutbox seals it; empty for the others.
	subject, text, html string
	attempts            int
	sent                sql.NullInt64
	createdAt           int64
}

// queuedColumns are the columns of an outbox row that scan reads, in its order.
const queuedColumns = `id, merchant_id, to_addr, bcc, sealed, subject, text_body, html_body, attempts, sent_at, created_at`

func (q *queued) scan(rows *sql.Rows) error {
	return rows.Scan(&q.id, &q.merchantID, &q.to, &q.bcc, &q.sealed, &q.subject, &q.text, &q.html, &q.attempts, &q.sent, &q.createdAt)
}

// selectQueued reads the outbox rows of query, which selects queuedColumns.
func selectQueued(ctx context.Context, q store.Querier, query string, args ...any) ([]queued, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queued
	for rows.Next() {
		var m queued
		if err := m.scan(rows); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// message is the e-mail q is, opened with s.
func (q queued) message(s store.Sealer) (Message, error) {
	msg := Message{To: q.to, Subject: q.subject, Text: q.text, HTML: q.html}
	if q.bcc != "" {
		msg.Bcc = strings.Split(q.bcc, ",")
	}
	if q.sealed == nil {
		return msg, nil
	}
	plain, err := s.Open(q.sealed, contentAAD(q.merchantID, q.to, q.bcc))
	if err != nil {
		return Message{}, fmt.Errorf("billing: outbox message %d does not open (damaged, or its recipients changed): %w", q.id, err)
	}
	var c content
	if err := json.Unmarshal(plain, &c); err != nil {
		return Message{}, fmt.Errorf("billing: outbox message %d: %w", q.id, err)
	}
	msg.Subject, msg.Text, msg.HTML = c.Subject, c.Text, c.HTML
	return msg, nil
}

// inClear selects the outbox rows that say something in clear: messages queued before the outbox
// sealed them. Its condition is the one of the index outbox_in_clear, which is empty once SealOutbox
// has run.
const inClear = `SELECT ` + queuedColumns + ` FROM outbox WHERE sealed IS NULL AND (subject <> '' OR text_body <> '' OR html_body <> '')`

// SealOutbox seals what the messages that wait in the outbox in clear say, and empties those sent;
// it returns how many messages it changed. Only messages queued by a Kassa that did not seal them
// are in clear: the server runs SealOutbox at each start, once it has loaded the keyring, and the
// first start after an upgrade does the work. On SQLite, which keeps overwritten bytes in its file
// and its write-ahead log, the database is then scrubbed (store.DB.Scrub).
func SealOutbox(ctx context.Context, db *store.DB) (int, error) {
	sealer, err := db.Sealer()
	if err != nil {
		return 0, err
	}
	var all []queued
	if err := db.Read(ctx, func(q store.Querier) error {
		all, err = selectQueued(ctx, q, inClear)
		return err
	}); err != nil || len(all) == 0 {
		return 0, err
	}
	err = db.Write(ctx, func(tx *store.Tx) error {
		for _, m := range all {
			if !m.sent.Valid {
				msg, _ := m.message(sealer) // in clear: nothing to open
				if _, err := tx.ExecContext(ctx, `UPDATE outbox SET sealed = $2, subject = '', text_body = '', html_body = ''
					WHERE id = $1 AND sent_at IS NULL AND sealed IS NULL`, m.id, seal(sealer, m.merchantID, m.to, m.bcc, msg)); err != nil {
					return err
				}
			}
			// A sent message keeps nothing, and neither does one that another node sent meanwhile.
			if _, err := tx.ExecContext(ctx, `UPDATE outbox SET subject = '', text_body = '', html_body = '' WHERE id = $1 AND sent_at IS NOT NULL`, m.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(all), db.Scrub(ctx)
}

// backoff is how long after its n-th failed attempt a message is tried again: 1, 5, 15 minutes, then
// hourly.
func backoff(n int) time.Duration {
	switch n {
	case 1:
		return time.Minute
	case 2:
		return 5 * time.Minute
	case 3:
		return 15 * time.Minute
	}
	return time.Hour
}

// UnsentWarnEvery is how often, at most, an engine without a mailer warns that e-mails wait in the
// outbox.
const UnsentWarnEvery = time.Hour

// Deliver sends the messages that are due, and returns how many it sent. A failure is retried later
// (backoff); nothing is dropped. A message sent keeps only its recipients and when it was sent: its
// subject and bodies are gone from the database. A failure is recorded as a short phrase
// (failureReason), the error itself going to the log. Without a mailer it sends nothing, and warns
// that e-mails wait; in demo mode (Config.Demo) it records them as not sent instead (recordDemo).
func (e *Engine) Deliver(ctx context.Context) (int, error) {
	if e.mailer == nil && e.demo {
		return 0, e.recordDemo(ctx)
	}
	if e.mailer == nil {
		return 0, e.warnUnsent(ctx)
	}
	sealer, err := e.db.Sealer()
	if err != nil {
		return 0, err
	}
	now := e.now().UnixMilli()
	var due []queued
	err = e.db.Read(ctx, func(q store.Querier) error {
		due, err = selectQueued(ctx, q, `SELECT `+queuedColumns+` FROM outbox
			WHERE sent_at IS NULL AND next_attempt <= $1 AND (lease_until IS NULL OR lease_until < $1) ORDER BY id LIMIT 50`, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, m := range due {
		r, err := e.db.Exec(ctx, `UPDATE outbox SET lease_until = $2 WHERE id = $1 AND sent_at IS NULL AND (lease_until IS NULL OR lease_until < $3)`,
			m.id, now+e.lease.Milliseconds(), now)
		if err != nil {
			return sent, err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			continue // another node sends it
		}
		msg, sendErr := m.message(sealer)
		if sendErr != nil {
			sendErr = fmt.Errorf("%w: %w", errDoesNotOpen, sendErr)
		} else {
			sendErr = e.mailer.Send(msg)
			e.metrics.MailSent(sendErr == nil)
		}
		done := e.now()
		if sendErr == nil {
			_, err = e.db.Exec(ctx, `UPDATE outbox SET sent_at = $2, attempts = attempts + 1, lease_until = NULL, last_error = '',
				sealed = NULL, subject = '', text_body = '', html_body = '' WHERE id = $1`, m.id, done.UnixMilli())
			sent++
		} else {
			e.log.WarnContext(ctx, "e-mail not sent, will retry", "outbox_id", m.id, "err", sendErr)
			_, err = e.db.Exec(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt = $2, last_error = $3, lease_until = NULL WHERE id = $1`,
				m.id, done.Add(backoff(m.attempts+1)).UnixMilli(), failureReason(sendErr))
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// warnUnsent warns that e-mails wait in the outbox because no SMTP server is configured: as soon as
// one waits, then at most every UnsentWarnEvery while any do, with how many — not at every run.
func (e *Engine) warnUnsent(ctx context.Context) error {
	now := e.now()
	if last := e.unsentWarned.Load(); last != 0 && now.Sub(time.Unix(0, last)) < UnsentWarnEvery {
		return nil
	}
	var n int
	err := e.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL`).Scan(&n)
	})
	if err != nil || n == 0 {
		return err
	}
	e.unsentWarned.Store(now.UnixNano())
	e.log.WarnContext(ctx, "e-mails (receipts, invitations) wait in the outbox: no SMTP server is configured; "+
		"start kassa serve with --smtp-url (or KASSA_SMTP_URL) to send them", "waiting", n)
	return nil
}

// Entry is a message of the outbox as it stands, opened: what a message that waits will say, and of
// a sent one only its recipients (its subject and bodies are empty).
type Entry struct {
	ID         int64
	MerchantID string
	Message
	Sent      bool
	CreatedAt time.Time
}

// Entries is every message of db's outbox, oldest first, opened with the database's keyring (loaded:
// envelope.NewKeyring). It is for tests and tools: the server opens a message only to send it.
func Entries(ctx context.Context, db *store.DB) ([]Entry, error) {
	sealer, err := db.Sealer()
	if err != nil {
		return nil, err
	}
	var all []queued
	if err := db.Read(ctx, func(q store.Querier) error {
		all, err = selectQueued(ctx, q, `SELECT `+queuedColumns+` FROM outbox ORDER BY id`)
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(all))
	for _, m := range all {
		msg, err := m.message(sealer)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry{ID: m.id, MerchantID: m.merchantID, Message: msg, Sent: m.sent.Valid, CreatedAt: time.UnixMilli(m.createdAt)})
	}
	return out, nil
}

package billing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// Receipt is what a receipt says: merchant, amount, masked card, date, transaction. Subscription
// charges and the dashboard's virtual terminal send it.
type Receipt struct {
	Merchant      string
	Amount        string // formatted (money.Format), without the currency
	Currency      string
	Card          string // brand and last four digits only (PCI DSS 3.4.1)
	Date          string
	TransactionID string
	Description   string
}

// ReceiptOf is the receipt of transaction t of the merchant named merchant, dated at in loc.
func ReceiptOf(merchant string, t payment.Transaction, description string, at time.Time, loc *time.Location) Receipt {
	return Receipt{Merchant: merchant, Amount: money.Format(t.Amount, t.Currency), Currency: t.Currency.Code,
		Card: t.CardType + " ending in " + t.CardSuffix, Date: at.In(loc).Format("January 2, 2006 15:04 MST"),
		TransactionID: t.TransactionID, Description: description}
}

var receiptHTML = template.Must(template.New("receipt").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Receipt from {{.Merchant}}</title></head>
<body style="font-family: system-ui, sans-serif; color: #1a1a1a">
<h1 style="font-size: 1.25rem">Receipt from {{.Merchant}}</h1>
<table>
<tr><th scope="row" align="left">Amount</th><td>{{.Amount}} {{.Currency}}</td></tr>
<tr><th scope="row" align="left">Card</th><td>{{.Card}}</td></tr>
<tr><th scope="row" align="left">Date</th><td>{{.Date}}</td></tr>
<tr><th scope="row" align="left">Transaction</th><td>{{.TransactionID}}</td></tr>
{{if .Description}}<tr><th scope="row" align="left">For</th><td>{{.Description}}</td></tr>{{end}}
</table>
</body></html>
`))

func (r Receipt) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Receipt from %s\n\nAmount:      %s %s\nCard:        %s\nDate:        %s\nTransaction: %s\n",
		r.Merchant, r.Amount, r.Currency, r.Card, r.Date, r.TransactionID)
	if r.Description != "" {
		fmt.Fprintf(&b, "For:         %s\n", r.Description)
	}
	return b.String()
}

// QueueReceipt puts receipt r, to the address to (and bcc), in the outbox in the caller's
// transaction: it is sent at least once, whatever happens to the SMTP server meanwhile.
func QueueReceipt(ctx context.Context, tx store.Querier, merchantID, to string, bcc []string, r Receipt, now time.Time) error {
	var html strings.Builder
	if err := receiptHTML.Execute(&html, r); err != nil {
		return err
	}
	return Queue(ctx, tx, merchantID, Message{To: to, Bcc: bcc, Subject: "Receipt from " + r.Merchant + ": " + r.Amount + " " + r.Currency,
		Text: r.text(), HTML: html.String()}, now)
}

// queueReceipt puts the receipt of a subscription charge in the outbox, in the transaction that
// records the charge. It reads the merchant's name through that transaction, not the merchant cache:
// on a miss the cache reads from the read pool, and on SQLite the write's callback runs on the
// goroutine that commits every write, which would wait there for a turn among the server's reads.
func (e *Engine) queueReceipt(ctx context.Context, tx *store.Tx, sub vault.Subscription, t payment.Transaction, now time.Time) error {
	m, err := merchant.Get(ctx, tx, sub.MerchantID)
	if err != nil {
		return err
	}
	var bcc string
	if err := tx.QueryRowContext(ctx, `SELECT bcc_emails FROM customers WHERE id = $1`, sub.CustomerID).Scan(&bcc); err != nil {
		return err
	}
	var bccs []string
	if bcc != "" {
		bccs = strings.Split(bcc, ",")
	}
	return QueueReceipt(ctx, tx, sub.MerchantID, sub.Email, bccs, ReceiptOf(m.Name, t, sub.Description, now, sub.Location()), now)
}

// Queue puts an e-mail about the merchant in the outbox, in the caller's transaction: the billing
// engine's Deliver sends it at least once, retrying while the SMTP server fails, and without a mailer
// it waits there. Receipts and the dashboard's password links go this way.
func Queue(ctx context.Context, tx store.Querier, merchantID string, msg Message, now time.Time) error {
	return queue(ctx, tx, merchantID, msg, nil, now)
}

// QueueSealed is Queue for an e-mail whose bodies carry a bearer secret, a link that works for
// whoever holds it (an invoice's pay link): its text and HTML are stored only sealed under ring, bound
// to the merchant and the recipient (Unseal), so that the outbox, kept after sending, and its backups
// hold no such link in clear. The engine opens them with its Keyring as it sends them.
func QueueSealed(ctx context.Context, tx store.Querier, ring *envelope.Keyring, merchantID string, msg Message, now time.Time) error {
	plain, _ := json.Marshal(sealedBody{Text: msg.Text, HTML: msg.HTML})
	sealed := ring.Seal(plain, bodyAAD(merchantID, msg.To))
	msg.Text, msg.HTML = "", ""
	return queue(ctx, tx, merchantID, msg, sealed, now)
}

func queue(ctx context.Context, tx store.Querier, merchantID string, msg Message, sealed []byte, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO outbox (merchant_id, to_addr, bcc, subject, text_body, html_body, sealed_body, next_attempt,
		created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, merchantID, msg.To, strings.Join(msg.Bcc, ","), msg.Subject, msg.Text, msg.HTML,
		sealed, now.UnixMilli())
	return err
}

// sealedBody is what an outbox row's sealed_body seals.
type sealedBody struct {
	Text string `json:"text"`
	HTML string `json:"html"`
}

// bodyAAD binds a sealed body to the merchant and the recipient of its e-mail.
func bodyAAD(merchantID, to string) []byte {
	return []byte("kassa outbox body\x00" + merchantID + "\x00" + to)
}

// Unseal opens the sealed_body of an outbox row of the merchant to the address to (QueueSealed): its
// text and HTML.
func Unseal(ring *envelope.Keyring, merchantID, to string, sealed []byte) (text, html string, err error) {
	if ring == nil {
		return "", "", errors.New("billing: a sealed e-mail, and no keyring to open it")
	}
	plain, err := ring.Open(sealed, bodyAAD(merchantID, to))
	if err != nil {
		return "", "", err
	}
	var b sealedBody
	err = json.Unmarshal(plain, &b)
	return b.Text, b.HTML, err
}

// backoff is how long after its n-th failed attempt a receipt is tried again: 1, 5, 15 minutes, then
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

// Deliver sends the receipts that are due, and returns how many it sent. A failure is retried later
// (backoff); nothing is dropped. Without a mailer it sends nothing, and warns that e-mails wait.
func (e *Engine) Deliver(ctx context.Context) (int, error) {
	if e.mailer == nil {
		return 0, e.warnUnsent(ctx)
	}
	now := e.now().UnixMilli()
	type message struct {
		id                                 int64
		merchantID, to, bcc, subject, t, h string
		sealed                             []byte
		attempts                           int
	}
	var due []message
	err := e.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT id, merchant_id, to_addr, bcc, subject, text_body, html_body, sealed_body, attempts FROM outbox
			WHERE sent_at IS NULL AND next_attempt <= $1 AND (lease_until IS NULL OR lease_until < $1) ORDER BY id LIMIT 50`, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m message
			if err := rows.Scan(&m.id, &m.merchantID, &m.to, &m.bcc, &m.subject, &m.t, &m.h, &m.sealed, &m.attempts); err != nil {
				return err
			}
			due = append(due, m)
		}
		return rows.Err()
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
		var bcc []string
		if m.bcc != "" {
			bcc = strings.Split(m.bcc, ",")
		}
		var sendErr error
		if m.sealed != nil {
			m.t, m.h, sendErr = Unseal(e.ring, m.merchantID, m.to, m.sealed)
		}
		if sendErr == nil {
			sendErr = e.mailer.Send(Message{To: m.to, Bcc: bcc, Subject: m.subject, Text: m.t, HTML: m.h})
		}
		e.metrics.MailSent(sendErr == nil)
		done := e.now()
		if sendErr == nil {
			_, err = e.db.Exec(ctx, `UPDATE outbox SET sent_at = $2, attempts = attempts + 1, lease_until = NULL WHERE id = $1`, m.id, done.UnixMilli())
			sent++
		} else {
			e.log.WarnContext(ctx, "receipt not sent, will retry", "outbox_id", m.id, "err", sendErr)
			_, err = e.db.Exec(ctx, `UPDATE outbox SET attempts = attempts + 1, next_attempt = $2, last_error = $3, lease_until = NULL WHERE id = $1`,
				m.id, done.Add(backoff(m.attempts+1)).UnixMilli(), sendErr.Error())
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// warnUnsent warns that e-mails wait in the outbox because no SMTP server is configured (issue 19,
// point 10: "warns when receipts wait in the outbox for lack of SMTP configuration (once, or at a
// sensible rate, not per tick spam)"): as soon as one waits, then at most every UnsentWarnEvery while
// any do, with how many.
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

// StatusReport counts what the billing engine has to do.
type StatusReport struct {
	Due           int `json:"due"`            // ACTIVE or RETRY subscriptions whose next run has come
	Retrying      int `json:"retrying"`       // RETRY subscriptions
	Suspended     int `json:"suspended"`      // SUSPENDED subscriptions
	OutboxBacklog int `json:"outbox_backlog"` // receipts not sent yet
}

// Status reports the billing engine's work at now.
func Status(ctx context.Context, db *store.DB, now time.Time) (StatusReport, error) {
	var s StatusReport
	err := db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM subscriptions WHERE status IN ('ACTIVE', 'RETRY') AND next_run IS NOT NULL AND next_run <= $1),
			(SELECT COUNT(*) FROM subscriptions WHERE status = 'RETRY'),
			(SELECT COUNT(*) FROM subscriptions WHERE status = 'SUSPENDED'),
			(SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL)`, now.UnixMilli()).Scan(&s.Due, &s.Retrying, &s.Suspended, &s.OutboxBacklog)
	})
	return s, err
}

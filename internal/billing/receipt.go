package billing

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"time"

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
	Amount        string // as people read it in the merchant's locale, with its currency (money.Display)
	Card          string // brand and last four digits only (PCI DSS 3.4.1)
	Date          string
	TransactionID string
	Description   string
	// Test: the transaction's test_mode — it moved no money, and the receipt says so in its subject,
	// at the top of its text and of its HTML, where the customer cannot miss it.
	Test bool
}

// testNotice is what a receipt of a test payment says of it.
const testNotice = "Test payment — no money moved"

// ReceiptOf is the receipt of transaction t of merchant m, dated at in loc, its amount in m's locale.
func ReceiptOf(m merchant.Merchant, t payment.Transaction, description string, at time.Time, loc *time.Location) Receipt {
	return Receipt{Merchant: m.Name, Amount: money.Display(t.Amount, t.Currency, m.Language()),
		Card: t.CardType + " ending in " + t.CardSuffix, Date: at.In(loc).Format("January 2, 2006 15:04 MST"),
		TransactionID: t.TransactionID, Description: description, Test: t.TestMode}
}

var receiptHTML = template.Must(template.New("receipt").Funcs(template.FuncMap{"testNotice": func() string { return testNotice }}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Receipt from {{.Merchant}}</title></head>
<body style="font-family: system-ui, sans-serif; color: #1a1a1a">
<h1 style="font-size: 1.25rem">Receipt from {{.Merchant}}</h1>
{{if .Test}}<p style="padding: .5rem .75rem; background: #fff3bf; color: #3d2e00; border-left: 4px solid #9a6700"><strong>{{testNotice}}.</strong> This receipt is of a test: nothing was charged to the card.</p>
{{end}}<table>
<tr><th scope="row" align="left">Amount</th><td>{{.Amount}}</td></tr>
<tr><th scope="row" align="left">Card</th><td>{{.Card}}</td></tr>
<tr><th scope="row" align="left">Date</th><td>{{.Date}}</td></tr>
<tr><th scope="row" align="left">Transaction</th><td>{{.TransactionID}}</td></tr>
{{if .Description}}<tr><th scope="row" align="left">For</th><td>{{.Description}}</td></tr>{{end}}
</table>
</body></html>
`))

// subject is the receipt's e-mail subject: the merchant and amount, and for a test payment testNotice.
func (r Receipt) subject() string {
	s := "Receipt from " + r.Merchant + ": " + r.Amount
	if r.Test {
		s += " (" + testNotice + ")"
	}
	return s
}

func (r Receipt) text() string {
	var b strings.Builder
	if r.Test {
		fmt.Fprintf(&b, "%s. This receipt is of a test: nothing was charged to the card.\n\n", testNotice)
	}
	fmt.Fprintf(&b, "Receipt from %s\n\nAmount:      %s\nCard:        %s\nDate:        %s\nTransaction: %s\n",
		r.Merchant, r.Amount, r.Card, r.Date, r.TransactionID)
	if r.Description != "" {
		fmt.Fprintf(&b, "For:         %s\n", r.Description)
	}
	return b.String()
}

// QueueReceipt puts receipt r, to the address to (and bcc), in the outbox in the caller's
// transaction: it is sent at least once, whatever happens to the SMTP server meanwhile.
func QueueReceipt(ctx context.Context, tx *store.Tx, merchantID, to string, bcc []string, r Receipt, now time.Time) error {
	var html strings.Builder
	if err := receiptHTML.Execute(&html, r); err != nil {
		return err
	}
	return Queue(ctx, tx, merchantID, Message{To: to, Bcc: bcc, Subject: r.subject(),
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
	return QueueReceipt(ctx, tx, sub.MerchantID, sub.Email, bccs, ReceiptOf(m, t, sub.Description, now, sub.Location()), now)
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

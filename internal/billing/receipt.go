package billing

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/branding"
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
	// SentTo is, on the page of the payment (ForPage), the address its receipt e-mail went to; "" in
	// the e-mail itself, and when no receipt was sent.
	SentTo string
	// LogoURL and Accent are the merchant's branding in the e-mail (Branded): the logo's absolute
	// URL, and its #rrggbb accent colour; "" for none.
	LogoURL, Accent string
}

// Branded is r with the merchant's branding b, its logo's URL under Kassa's public URL base.
func (r Receipt) Branded(b branding.Branding, base string) Receipt {
	r.LogoURL, r.Accent = b.LogoURL(base), b.Accent
	return r
}

// ReceiptWindow is how long after its payment the page of a payment (the hosted page's session, an
// invoice's link) shows the card and the receipt's address: long enough for the customer who just
// paid, and no longer, so that a page URL found later in a history or a forwarded e-mail shows no more
// than the merchant, the amount, the date and the reference.
const ReceiptWindow = time.Hour

// ForPage is r as the page of its payment shows it at now, the payment made at paid, its receipt
// e-mailed to sentTo ("" for none): past ReceiptWindow, without the card nor the address.
func (r Receipt) ForPage(paid, now time.Time, sentTo string) Receipt {
	r.SentTo = sentTo
	if now.Sub(paid) >= ReceiptWindow {
		r.Card, r.SentTo = "", ""
	}
	return r
}

// pageReceipt is the receipt section of a payment's page: a definition list, styled by the page
// (class "receipt"; its accent through the page's own --accent).
var pageReceipt = template.Must(template.New("page-receipt").Parse(`<section class="receipt" id="receipt" aria-labelledby="receipt-title">
<h2 id="receipt-title">Receipt</h2>
<p class="done">Paid{{if .Test}} (test payment: no money moved){{end}}</p>
<dl>
<dt>Paid to</dt><dd>{{.Merchant}}</dd>
<dt>Amount</dt><dd>{{.Amount}}</dd>
{{if .Card}}<dt>Card</dt><dd id="receipt-card">{{.Card}}</dd>
{{end}}<dt>Date</dt><dd>{{.Date}}</dd>
<dt>Reference</dt><dd id="receipt-reference">{{.TransactionID}}</dd>
{{if .Description}}<dt>For</dt><dd>{{.Description}}</dd>
{{end}}</dl>
{{if .SentTo}}<p id="receipt-sent">A receipt was sent to {{.SentTo}}.</p>
{{end}}</section>`))

// HTML is r as the page of its payment shows it (after ForPage).
func (r Receipt) HTML() (template.HTML, error) {
	var b strings.Builder
	if err := pageReceipt.Execute(&b, r); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil // html/template escaped every value above
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
{{if .LogoURL}}<p><img src="{{.LogoURL}}" alt="{{.Merchant}}" style="max-height: 60px; max-width: 200px"></p>
{{end}}<h1 style="font-size: 1.25rem{{with .Accent}}; color: {{.}}{{end}}">Receipt from {{.Merchant}}</h1>
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
	return Queue(ctx, tx, merchantID, Message{Kind: KindReceipt, To: to, Bcc: bcc, Subject: r.subject(),
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
	brand, err := branding.Get(ctx, tx, sub.MerchantID)
	if err != nil {
		return err
	}
	return QueueReceipt(ctx, tx, sub.MerchantID, sub.Email, bccs, ReceiptOf(m, t, sub.Description, now, sub.Location()).Branded(brand, e.base), now)
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

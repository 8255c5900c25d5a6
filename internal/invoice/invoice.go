// Package invoice is the invoice service of the gateway API: invoices that a merchant
// bills a customer with, their lines and totals computed exactly in minor units (totals.go), their
// storage, the routes under /invoice-service/invoice for bearer tokens with the invoice scope, the
// e-mail that sends an invoice through the outbox, and the public page its payment_url opens.
package invoice

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/money"
)

// Status is an invoice's status.
type Status string

// The statuses of an invoice. DRAFT until it is sent; SENT once e-mailed; PAID once paid; OVERDUE when
// sent and past its due date; CANCELLED when the merchant cancels it.
const (
	Draft     Status = "DRAFT"
	Sent      Status = "SENT"
	Paid      Status = "PAID"
	Overdue   Status = "OVERDUE"
	Cancelled Status = "CANCELLED"
)

// ParseStatus reads a status, upper or lower case; CANCELED is CANCELLED, as subscriptions accept
// both spellings (wire-contract.md).
func ParseStatus(s string) (Status, bool) {
	switch st := Status(upper(s)); st {
	case Draft, Sent, Paid, Overdue, Cancelled:
		return st, true
	case "CANCELED":
		return Cancelled, true
	}
	return "", false
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Item is a line of an invoice: quantity in thousandths, amounts in minor units.
type Item struct {
	Description string `json:"description"`
	SKU         string `json:"sku,omitempty"`
	Quantity    int64  `json:"quantity"`   // thousandths
	UnitPrice   int64  `json:"unit_price"` // minor units
	Total       int64  `json:"total"`
	Tax         int64  `json:"tax"`
}

// Customer is whom an invoice bills.
type Customer struct {
	LookupID   string // a vault customer's, or ""
	Email      string
	FirstName  string
	LastName   string
	Company    string
	Telephone  string
	Address1   string
	Address2   string
	City       string
	Province   string
	Country    string
	PostalCode string
}

// name is the customer's first and last names, as the invoice's page and PDF show them.
func (cu Customer) name() string {
	return strings.TrimSpace(cu.FirstName + " " + cu.LastName)
}

// Invoice is a merchant's invoice.
type Invoice struct {
	ID         int64
	LookupID   string
	MerchantID string
	Number     string
	Status     Status
	// PayKey is the secret of the invoice's public links (payment_url, pdf_url), in clear: set when
	// the invoice is made, or read by the Service (Service.Get) or by a link, and "" when read
	// without the keyring (List). The database holds only its SHA-256 and the key sealed (sealedKey).
	PayKey       string
	sealedKey    []byte
	Currency     money.Currency
	DueDate      string // YYYY-MM-DD or ""
	TaxRate      int64  // percent, RateScale decimals
	Items        []Item
	Discount     int64
	Shipping     int64
	Totals       Totals
	Customer     Customer
	Notes        string
	Terms        string
	CustomFields map[string]string
	Version      int64 // the row's version when read: a change saved over another is refused
	SentAt       time.Time
	PaidAt       time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// IntentID is the payment intent the invoice is paid through now ("" before its first payment
	// page): at most one live intent per invoice (pay.go).
	IntentID string
	// SessionID is the hosted-page session its page last handed out ("" for none), handed out again
	// while it serves (pay.go).
	SessionID string
	// Payment is how the invoice was paid, once PAID; nil before.
	Payment *Payment
	// ReminderDays is the invoice's reminder schedule: days relative to its due date (0 the due date,
	// negative before it), ascending (overdue.go).
	ReminderDays []int
	// RemindersSent counts the reminders the billing engine sent.
	RemindersSent int
	// RemindedUntil is when reminders were last taken care of: one whose day began at or before it
	// was sent or passed over (the last sending, the last reminder). Zero before the first sending.
	RemindedUntil time.Time
	// SentTo is the address the invoice was last sent to: its reminders go there.
	SentTo string
}

// Payment is how an invoice was paid, as recorded in the transaction that settled its charge.
type Payment struct {
	TransactionID string `json:"transaction_id"`
	Method        string `json:"method"` // card
	CardType      string `json:"card_type,omitempty"`
	CardLast4     string `json:"card_last4,omitempty"`
	Amount        int64  `json:"amount"` // minor units of the invoice's currency
	Date          int64  `json:"date"`   // epoch milliseconds
}

// WirePayment is payment_info as the API shows it: the amount as a decimal number.
type WirePayment struct {
	TransactionID string      `json:"transaction_id"`
	Method        string      `json:"method"`
	CardType      string      `json:"card_type,omitempty"`
	CardLast4     string      `json:"card_last4,omitempty"`
	Amount        json.Number `json:"amount"`
	Currency      string      `json:"currency"`
	Date          int64       `json:"date"`
}

// WireItem is a line as the API shows it.
type WireItem struct {
	Description string      `json:"description"`
	Quantity    json.Number `json:"quantity"`
	UnitPrice   json.Number `json:"unit_price"`
	SKU         string      `json:"sku,omitempty"`
	TotalAmount json.Number `json:"total_amount"`
	TaxAmount   json.Number `json:"tax_amount"`
}

// Wire is an invoice as the API shows it: amounts as decimal numbers in the currency's decimals, times
// in epoch milliseconds (wire-contract.md's style). payment_url opens the invoice's public page, which
// leads to the card form; pdf_url is the invoice as a PDF (pdf.go); payment_info says how a PAID
// invoice was paid; reminder_days is its reminder schedule and reminders_sent how many reminders
// went out (overdue.go).
type Wire struct {
	ID                 int64             `json:"id"`
	LookupID           string            `json:"lookup_id"`
	InvoiceNumber      string            `json:"invoice_number"`
	Status             string            `json:"status"`
	DueDate            string            `json:"due_date,omitempty"`
	Items              []WireItem        `json:"items"`
	Currency           string            `json:"currency"`
	TaxRate            json.Number       `json:"tax_rate"`
	DiscountAmount     json.Number       `json:"discount_amount"`
	ShippingAmount     json.Number       `json:"shipping_amount"`
	SubtotalAmount     json.Number       `json:"subtotal_amount"`
	TaxAmount          json.Number       `json:"tax_amount"`
	TotalAmount        json.Number       `json:"total_amount"`
	CustomerLookupID   string            `json:"customer_lookup_id,omitempty"`
	CustomerEmail      string            `json:"customer_email,omitempty"`
	CustomerFirstName  string            `json:"customer_first_name,omitempty"`
	CustomerLastName   string            `json:"customer_last_name,omitempty"`
	CustomerCompany    string            `json:"customer_company,omitempty"`
	CustomerTelephone  string            `json:"customer_telephone,omitempty"`
	CustomerAddress1   string            `json:"customer_address1,omitempty"`
	CustomerAddress2   string            `json:"customer_address2,omitempty"`
	CustomerCity       string            `json:"customer_city,omitempty"`
	CustomerProvince   string            `json:"customer_province,omitempty"`
	CustomerCountry    string            `json:"customer_country,omitempty"`
	CustomerPostalCode string            `json:"customer_postal_code,omitempty"`
	Notes              string            `json:"notes,omitempty"`
	Terms              string            `json:"terms,omitempty"`
	CustomFields       map[string]string `json:"custom_fields"`
	PaymentURL         string            `json:"payment_url,omitempty"`
	PDFURL             string            `json:"pdf_url,omitempty"`
	PaymentInfo        *WirePayment      `json:"payment_info,omitempty"`
	ReminderDays       []int             `json:"reminder_days"`
	RemindersSent      int               `json:"reminders_sent"`
	SentAt             *int64            `json:"sent_at,omitempty"`
	PaidAt             *int64            `json:"paid_at,omitempty"`
	CreatedAt          int64             `json:"created_at"`
	UpdatedAt          int64             `json:"updated_at"`
}

func millis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// PaymentURL is the invoice's public page under the server's public URL; "" when its key was not read.
func (inv Invoice) PaymentURL(publicURL string) string {
	if inv.PayKey == "" {
		return ""
	}
	return publicURL + "/invoice/" + inv.PayKey + "/pay"
}

// PDFURL is the invoice as a PDF under the server's public URL: the same secret as its page's.
func (inv Invoice) PDFURL(publicURL string) string {
	if inv.PayKey == "" {
		return ""
	}
	return publicURL + "/invoice/" + inv.PayKey + "/pdf"
}

// Wire renders inv; publicURL is the base of its payment_url and pdf_url.
func (inv Invoice) Wire(publicURL string) Wire {
	w := inv.data()
	w.PaymentURL, w.PDFURL = inv.PaymentURL(publicURL), inv.PDFURL(publicURL)
	return w
}

// data is inv as the API shows it but for payment_url and pdf_url: what its events carry. The links'
// key is a bearer secret, and events are stored, and delivered to webhook endpoints, in clear; a
// receiver reads the links from the API (GET /invoice-service/invoice/{id}), as a hosted-page
// session's events carry no page URL either.
func (inv Invoice) data() Wire {
	c := inv.Currency
	amt := func(v int64) json.Number { return json.Number(money.Format(v, c)) }
	w := Wire{ID: inv.ID, LookupID: inv.LookupID, InvoiceNumber: inv.Number, Status: string(inv.Status), DueDate: inv.DueDate,
		Items: make([]WireItem, len(inv.Items)), Currency: c.Code, TaxRate: json.Number(formatDecimal(inv.TaxRate, RateScale)),
		DiscountAmount: amt(inv.Discount), ShippingAmount: amt(inv.Shipping), SubtotalAmount: amt(inv.Totals.Subtotal),
		TaxAmount: amt(inv.Totals.Tax), TotalAmount: amt(inv.Totals.Total),
		CustomerLookupID: inv.Customer.LookupID, CustomerEmail: inv.Customer.Email, CustomerFirstName: inv.Customer.FirstName,
		CustomerLastName: inv.Customer.LastName, CustomerCompany: inv.Customer.Company, CustomerTelephone: inv.Customer.Telephone,
		CustomerAddress1: inv.Customer.Address1, CustomerAddress2: inv.Customer.Address2, CustomerCity: inv.Customer.City,
		CustomerProvince: inv.Customer.Province, CustomerCountry: inv.Customer.Country, CustomerPostalCode: inv.Customer.PostalCode,
		Notes: inv.Notes, Terms: inv.Terms, CustomFields: inv.CustomFields, ReminderDays: inv.ReminderDays, RemindersSent: inv.RemindersSent,
		SentAt: millis(inv.SentAt), PaidAt: millis(inv.PaidAt), CreatedAt: inv.CreatedAt.UnixMilli(), UpdatedAt: inv.UpdatedAt.UnixMilli()}
	if p := inv.Payment; p != nil {
		w.PaymentInfo = &WirePayment{TransactionID: p.TransactionID, Method: p.Method, CardType: p.CardType, CardLast4: p.CardLast4,
			Amount: amt(p.Amount), Currency: c.Code, Date: p.Date}
	}
	if w.CustomFields == nil {
		w.CustomFields = map[string]string{}
	}
	if w.ReminderDays == nil {
		w.ReminderDays = []int{}
	}
	for i, it := range inv.Items {
		w.Items[i] = WireItem{Description: it.Description, Quantity: json.Number(formatDecimal(it.Quantity, QuantityScale)),
			UnitPrice: amt(it.UnitPrice), SKU: it.SKU, TotalAmount: amt(it.Total), TaxAmount: amt(it.Tax)}
	}
	return w
}

// Package payment is Kassa's payments core: one ledger of card operations (sale, authorization,
// capture, refund, void) with one state machine, the money invariants, crash recovery and the audit
// trail, and the transaction service of the gateway API on top of it. A sale made through the gateway
// API, a hosted-page payment and a subscription charge are rows of the same ledger.
package payment

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
)

// Kinds of transaction, spelled as the wire's transaction_type.
const (
	KindSale          = "SALE"
	KindAuthorization = "AUTHORIZATION"
	KindCapture       = "CAPTURE"
	KindRefund        = "REFUND"
	KindVoid          = "VOID"
)

// Statuses of a transaction. PENDING lasts from the recorded attempt to the recorded outcome.
const (
	StatusPending  = "PENDING"
	StatusApproved = "APPROVED"
	StatusDeclined = "DECLINED"
)

// Sources of a transaction, spelled as the wire's transaction_source.
const (
	SourceEcommerce = "E_COMMERCE"
	SourceRecurring = "RECURRING"
	SourceHPP       = "HPP"
)

// Customer is the optional customer detail a transaction carries.
type Customer struct {
	Email, FirstName, LastName, Company, Telephone          string
	Address1, Address2, City, Province, Country, PostalCode string
	CustomID, InvoiceID, OrderID, Description               string
	// CustomerLookupID is the vault customer whose stored card paid (its lookup id), on the payment
	// and on its captures, refunds and voids; "" for a card sent with the payment.
	CustomerLookupID string
}

// Transaction is one row of the ledger.
type Transaction struct {
	ID            int64
	TransactionID string
	MerchantID    string
	Kind          string
	Status        string
	ParentID      int64 // the transaction a capture, refund or void acts on; 0 for none
	Amount        int64 // minor units of Currency
	Currency      money.Currency
	Reserved      int64  // see the transactions table
	ClosedBy      string // see the transactions table
	Message       string
	DeclineCode   string
	ProcessorRef  string
	CardType      string
	CardPrefix    string
	CardSuffix    string
	TestMode      bool
	Source        string
	Customer
	ClientID       string
	RequestID      string
	IdempotencyKey string
	CreatedAt      time.Time
	UpdatedAt      time.Time

	ParentTransactionID string // the parent's transaction_id, for the response

	// ProcessorAccount is the processor account that took the transaction ("" for the simulator), to
	// which its follow-ups and its recovery go; ProcessorTrace what that processor prepared for it
	// before it was sent (processor.Preparer).
	ProcessorAccount string
	ProcessorTrace   string
	// MailOrder: a mail or telephone order taken at the dashboard's virtual terminal, sent to the
	// processor as such (processor.Payment.MailOrder).
	MailOrder bool

	// Authentication is the cardholder's 3-D Secure outcome of a sale or authorization
	// (processor.AuthenticationSucceeded or AuthenticationFailed), "" when no challenge was run. The
	// dashboard's transaction page shows it where there was one.
	Authentication string

	// Limit is the velocity limit that declined the payment without asking the processor (decline code
	// velocity.DeclineCode), for the response's rate-limit headers; nil otherwise. It is not stored.
	Limit *fault.RateLimit
}

// CardDeclined reports whether t is a decline of the card, which the velocity limits count. A
// processing error is not: the processor failed (or the attempt was interrupted), which says nothing
// about the card, and counting it would throttle every merchant through a processor's outage.
func (t Transaction) CardDeclined() bool {
	return t.Status == StatusDeclined && t.DeclineCode != processor.CodeProcessingError
}

// columns is every column a Transaction is read from, in scan order.
const columns = `t.id, t.transaction_id, t.merchant_id, t.kind, t.status, COALESCE(t.parent_id, 0), t.amount, t.currency,
	t.scale, t.reserved, COALESCE(t.closed_by, ''), t.message, COALESCE(t.decline_code, ''), COALESCE(t.processor_ref, ''),
	t.card_type, t.card_prefix, t.card_suffix, t.test_mode, t.source,
	COALESCE(t.email, ''), COALESCE(t.first_name, ''), COALESCE(t.last_name, ''), COALESCE(t.company, ''),
	COALESCE(t.telephone, ''), COALESCE(t.address1, ''), COALESCE(t.address2, ''), COALESCE(t.city, ''),
	COALESCE(t.province, ''), COALESCE(t.country, ''), COALESCE(t.postal_code, ''), COALESCE(t.custom_id, ''),
	COALESCE(t.invoice_id, ''), COALESCE(t.order_id, ''), COALESCE(t.description, ''),
	COALESCE(t.client_id, ''), COALESCE(t.request_id, ''), COALESCE(t.idempotency_key, ''),
	t.created_at, t.updated_at, COALESCE(t.parent_transaction_id, ''), COALESCE(t.processor_account, ''),
	COALESCE(t.processor_trace, ''), COALESCE(t.customer_lookup_id, ''), COALESCE(t.authentication, ''), t.mail_order`

// from is the FROM clause that goes with columns.
const from = ` FROM transactions t `

type scanner interface{ Scan(dest ...any) error }

// scanTransaction reads a row of columns, and into extra the row's columns after them.
func scanTransaction(s scanner, extra ...any) (Transaction, error) {
	var t Transaction
	var created, updated int64
	c := &t.Customer
	err := s.Scan(append([]any{&t.ID, &t.TransactionID, &t.MerchantID, &t.Kind, &t.Status, &t.ParentID, &t.Amount, &t.Currency.Code,
		&t.Currency.Digits, &t.Reserved, &t.ClosedBy, &t.Message, &t.DeclineCode, &t.ProcessorRef,
		&t.CardType, &t.CardPrefix, &t.CardSuffix, &t.TestMode, &t.Source,
		&c.Email, &c.FirstName, &c.LastName, &c.Company, &c.Telephone, &c.Address1, &c.Address2, &c.City,
		&c.Province, &c.Country, &c.PostalCode, &c.CustomID, &c.InvoiceID, &c.OrderID, &c.Description,
		&t.ClientID, &t.RequestID, &t.IdempotencyKey, &created, &updated, &t.ParentTransactionID,
		&t.ProcessorAccount, &t.ProcessorTrace, &c.CustomerLookupID, &t.Authentication, &t.MailOrder}, extra...)...)
	t.CreatedAt, t.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return t, err
}

// nullable stores "" as NULL.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Wire is a transaction as the gateway API shows it (wire-contract.md, Transactions).
type Wire struct {
	ID                    int64       `json:"id"`
	TransactionID         string      `json:"transaction_id"`
	Type                  string      `json:"transaction_type"`
	Result                string      `json:"transaction_result"`
	Success               bool        `json:"transaction_success"`
	Message               string      `json:"transaction_message"`
	Time                  int64       `json:"transaction_time"`
	Amount                json.Number `json:"amount"`
	Currency              string      `json:"currency"`
	CardType              string      `json:"card_type"`
	CardSuffix            string      `json:"card_suffix"`
	Captured              bool        `json:"captured"`
	TestMode              bool        `json:"test_mode"`
	Source                string      `json:"transaction_source"`
	DeclineCode           string      `json:"decline_code,omitempty"`
	OriginalID            int64       `json:"original_id,omitempty"`
	OriginalTransactionID string      `json:"original_transaction_id,omitempty"`
	Email                 string      `json:"email,omitempty"`
	FirstName             string      `json:"first_name,omitempty"`
	LastName              string      `json:"last_name,omitempty"`
	Company               string      `json:"company,omitempty"`
	Telephone             string      `json:"telephone,omitempty"`
	Address1              string      `json:"address1,omitempty"`
	Address2              string      `json:"address2,omitempty"`
	City                  string      `json:"city,omitempty"`
	Province              string      `json:"province,omitempty"`
	Country               string      `json:"country,omitempty"`
	PostalCode            string      `json:"postal_code,omitempty"`
	CustomID              string      `json:"custom_id,omitempty"`
	InvoiceID             string      `json:"invoice_id,omitempty"`
	OrderID               string      `json:"order_id,omitempty"`
	Description           string      `json:"description,omitempty"`
}

// Wire renders t. A transaction still pending is never rendered: the ledger hides it.
func (t Transaction) Wire() Wire {
	approved := t.Status == StatusApproved
	result := StatusApproved
	if !approved {
		result = StatusDeclined
	}
	c := t.Customer
	return Wire{
		ID: t.ID, TransactionID: t.TransactionID, Type: t.Kind, Result: result, Success: approved,
		Message: t.Message, Time: t.CreatedAt.UnixMilli(), Amount: json.Number(money.Format(t.Amount, t.Currency)),
		Currency: t.Currency.Code, CardType: t.CardType, CardSuffix: t.CardSuffix,
		// "captured: false on an AUTHORIZATION, true on SALE and CAPTURE" — when they moved money.
		Captured: approved && (t.Kind == KindSale || t.Kind == KindCapture),
		TestMode: t.TestMode, Source: t.Source, DeclineCode: t.DeclineCode,
		OriginalID: t.ParentID, OriginalTransactionID: t.ParentTransactionID,
		Email: c.Email, FirstName: c.FirstName, LastName: c.LastName, Company: c.Company, Telephone: c.Telephone,
		Address1: c.Address1, Address2: c.Address2, City: c.City, Province: c.Province, Country: c.Country,
		PostalCode: c.PostalCode, CustomID: c.CustomID, InvoiceID: c.InvoiceID, OrderID: c.OrderID, Description: c.Description,
	}
}

package vault

import (
	"context"
	"net/url"

	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
)

// The vault's operations for the merchant dashboard's Customers section, by the API's rules: the same
// validation and messages, the same 404s and 409s, the same audit records. A form's fields carry the
// API's names, and each is read as the API reads its JSON counterpart (field.Form).

// Field is one of a customer's detail fields: its name in the API and in the dashboard's form, and its
// bound in characters.
type Field struct {
	Name string
	Max  int
}

// DetailFields are a customer's detail fields, in the API's order.
func DetailFields() []Field {
	var out []Field
	for _, f := range detailFields(&detailsBody{}, &Details{}) {
		out = append(out, Field{f.name, f.max})
	}
	return out
}

// Value is the text of the detail field named name ("" for a name that is none).
func (d Details) Value(name string) string {
	for _, f := range detailFields(&detailsBody{}, &d) {
		if f.name == name {
			return *f.out
		}
	}
	return ""
}

// formDetails is the body of a form that sends detail fields; a field the form does not send is
// absent, and keeps its value in an update.
func formDetails(form url.Values) *detailsBody {
	var b detailsBody
	for _, f := range detailFields(&b, &Details{}) {
		if form.Has(f.name) {
			*f.in = field.Form(form.Get(f.name))
		}
	}
	return &b
}

// CreateCustomer stores a new customer of the merchant from a form's detail fields. A bad field is a
// *fault.Error naming it.
func (s *Service) CreateCustomer(ctx context.Context, merchantID string, form url.Values) (Customer, error) {
	var d Details
	if err := formDetails(form).apply(&d); err != nil {
		return Customer{}, err
	}
	return s.createCustomer(ctx, merchantID, d)
}

// UpdateCustomer changes the detail fields a form sends.
func (s *Service) UpdateCustomer(ctx context.Context, merchantID, lookupID string, form url.Values) (Customer, error) {
	return s.updateCustomer(ctx, merchantID, lookupID, formDetails(form))
}

// DeleteCustomer removes a customer and its cards: a 409 customer_subscribed while a subscription of
// it is current.
func (s *Service) DeleteCustomer(ctx context.Context, merchantID, lookupID string) error {
	return s.deleteCustomer(ctx, merchantID, lookupID)
}

// MakeDefault makes a card the customer's default card.
func (s *Service) MakeDefault(ctx context.Context, merchantID, customerLookup, cardLookup string) (Customer, error) {
	return s.updateCard(ctx, merchantID, customerLookup, cardLookup, cardUpdate{IsDefault: field.Form("true")})
}

// DeleteCard removes a card: a 409 card_in_use while a current subscription bills it.
func (s *Service) DeleteCard(ctx context.Context, merchantID, customerLookup, cardLookup string) (Customer, error) {
	return s.deleteCard(ctx, merchantID, customerLookup, cardLookup)
}

// ListCustomers returns a page of the merchant's customers that f selects, newest first, with their
// cards and subscriptions.
func (s *Service) ListCustomers(ctx context.Context, merchantID string, f CustomerFilter) ([]Customer, error) {
	return s.listCustomers(ctx, merchantID, f)
}

// Pay charges a stored card of the customer — a sale or an authorization (kind) — of amount in
// currency as a form sends them, through the API's path (pay): the same amount and currency rules,
// the ledger's idempotency under idempotencyKey.
func (s *Service) Pay(ctx context.Context, who payment.Actor, m merchant.Merchant, kind, customerLookup, cardLookup, amount, currency,
	idempotencyKey string) (payment.Transaction, error) {
	return s.pay(ctx, who, m, kind, customerLookup, cardLookup, payBody{Amount: field.Form(amount), Currency: field.Form(currency)}, idempotencyKey)
}

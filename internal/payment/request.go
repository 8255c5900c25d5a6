package payment

import (
	"strings"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// Request bodies are decoded into field.Values and read by name (package field), so that every error
// names its field and the shapes real clients send are accepted. Unknown fields are ignored.

// CurrencyOf reads the currency field of a gateway-style body (the transaction and invoice services):
// an ISO 4217 code the merchant accepts, in either case, or the merchant's default when absent.
func CurrencyOf(f field.Value, m merchant.Merchant) (money.Currency, error) {
	s, err := f.Str("currency")
	if err != nil {
		return money.Currency{}, err
	}
	if s == "" {
		s = m.DefaultCurrency
	}
	c, ok := money.Lookup(s)
	if !ok {
		return money.Currency{}, fault.Invalid("currency", "currency %q is not an ISO 4217 currency code", s)
	}
	if !m.Accepts(c.Code) {
		return money.Currency{}, fault.Invalid("currency", "currency %s is not enabled for this merchant (accepted: %s)", c.Code, strings.Join(m.Currencies, ", "))
	}
	return c, nil
}

// ChargeAmount reads the amount and currency of a sale or authorization for merchant m: a currency the
// merchant accepts (its default when absent), and an amount in that currency's decimals, within the
// merchant's maximum, above zero (zero is allowed for an authorization: a card verification).
func ChargeAmount(kind string, amount, currency field.Value, m merchant.Merchant) (int64, money.Currency, error) {
	c, err := CurrencyOf(currency, m)
	if err != nil {
		return 0, c, err
	}
	amt, set, err := amount.Amount("amount", c)
	switch {
	case err != nil:
		return 0, c, err
	case !set:
		return 0, c, fault.Invalid("amount", "amount is required")
	case amt == 0 && kind == KindSale:
		return 0, c, fault.Invalid("amount", "amount must be greater than 0")
	case !m.WithinMax(amt, c):
		return 0, c, fault.Invalid("amount", "amount exceeds this merchant's maximum of %s", m.MaxAmount())
	}
	return amt, c, nil
}

// customerFields is the optional customer detail of a request body.
type customerFields struct {
	Email       field.Value `json:"email"`
	FirstName   field.Value `json:"first_name"`
	LastName    field.Value `json:"last_name"`
	Company     field.Value `json:"company"`
	Telephone   field.Value `json:"telephone"`
	Address1    field.Value `json:"address1"`
	Address2    field.Value `json:"address2"`
	City        field.Value `json:"city"`
	Province    field.Value `json:"province"`
	Country     field.Value `json:"country"`
	PostalCode  field.Value `json:"postal_code"`
	CustomID    field.Value `json:"custom_id"`
	InvoiceID   field.Value `json:"invoice_id"`
	OrderID     field.Value `json:"order_id"`
	Description field.Value `json:"description"`
}

// customer reads and bounds the customer detail. The e-mail address, when sent, must be one.
func (f customerFields) customer() (Customer, error) {
	var c Customer
	var err error
	read := func(dst *string, name string, f field.Value, max int) {
		if err == nil {
			*dst, err = f.Text(name, max)
		}
	}
	read(&c.Email, "email", f.Email, 254)
	read(&c.FirstName, "first_name", f.FirstName, 100)
	read(&c.LastName, "last_name", f.LastName, 100)
	read(&c.Company, "company", f.Company, 200)
	read(&c.Telephone, "telephone", f.Telephone, 50)
	read(&c.Address1, "address1", f.Address1, 200)
	read(&c.Address2, "address2", f.Address2, 200)
	read(&c.City, "city", f.City, 100)
	read(&c.Province, "province", f.Province, 100)
	read(&c.Country, "country", f.Country, 100)
	read(&c.PostalCode, "postal_code", f.PostalCode, 20)
	read(&c.CustomID, "custom_id", f.CustomID, 100)
	read(&c.InvoiceID, "invoice_id", f.InvoiceID, 100)
	read(&c.OrderID, "order_id", f.OrderID, 100)
	read(&c.Description, "description", f.Description, 1000)
	if err != nil {
		return Customer{}, err
	}
	if c.Email != "" {
		if e := merchant.ValidateEmail(c.Email); e != nil {
			return Customer{}, fault.Invalid("email", "email %s", e)
		}
	}
	return c, nil
}

// chargeBody is the body of sale and authorize (gateway-api.md, "Transaction request fields").
type chargeBody struct {
	Amount          field.Value `json:"amount"`
	Currency        field.Value `json:"currency"`
	CardNumber      field.Value `json:"card_number"`
	CardExpiryMonth field.Value `json:"card_expiry_month"`
	CardExpiryYear  field.Value `json:"card_expiry_year"`
	CVV2            field.Value `json:"cvv2"`
	Token           field.Value `json:"token"`
	TestMode        field.Value `json:"test_mode"`
	customerFields
}

// charge validates the body into a Charge of kind for merchant m. Fields are checked in the order a
// person fills them in, and the first problem is reported. A body with a card token returns the token
// and a Charge without card: the caller opens the token.
func (b chargeBody) charge(kind string, m merchant.Merchant) (Charge, string, error) {
	c := Charge{Kind: kind}
	var err error
	token, err := b.Token.Str("token")
	if err != nil {
		return c, "", err
	}
	if token != "" {
		// "Sending token together with any raw card field is a 400" (wire-contract.md, Transactions).
		for _, f := range []struct {
			name string
			f    field.Value
		}{{"card_number", b.CardNumber}, {"card_expiry_month", b.CardExpiryMonth}, {"card_expiry_year", b.CardExpiryYear}, {"cvv2", b.CVV2}} {
			if f.f.Set() {
				return c, "", fault.Invalid(f.name, "%s cannot be sent together with token: the token carries the card", f.name)
			}
		}
	}
	if c.Amount, c.Currency, err = ChargeAmount(kind, b.Amount, b.Currency, m); err != nil {
		return c, "", err
	}
	if token == "" {
		if c.Card, c.Expiry, err = field.Card(b.CardNumber, b.CardExpiryMonth, b.CardExpiryYear); err != nil {
			return c, "", err
		}
		if c.CVV, err = field.CVV(b.CVV2, card.BrandOf(c.Card)); err != nil {
			return c, "", err
		}
	}
	if c.TestMode, err = b.TestMode.Flag("test_mode"); err != nil {
		return c, "", err
	}
	c.Customer, err = b.customer()
	return c, token, err
}

// followUpBody is the body of capture, refund and void.
type followUpBody struct {
	Amount   field.Value `json:"amount"`
	Currency field.Value `json:"currency"`
	TestMode field.Value `json:"test_mode"`
}

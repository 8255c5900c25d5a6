package payment

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// Request fields are decoded into fields of kind and text and read by name, so that every error names its field
// and so that the shapes real clients send are accepted: "Be tolerant in what you accept"
// (wire-contract.md, General rules) — amounts as numbers or numeric strings, card fields as strings or
// integers, two- or four-digit years, flags as booleans or "true"/"false", unknown fields ignored.

// field is one value of a request body, read once while the body is decoded: its JSON kind and, for
// a string or a number, its text. Absent and null are the zero field.
type field struct {
	kind byte   // 0 absent or null, 's' string, 'n' number, 'b' boolean, 'o' object or array
	text string // the string's value, the number's literal, or "true"/"false"
}

// UnmarshalJSON keeps the value's kind and text.
func (f *field) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*f = field{}
	case 't':
		*f = field{'b', "true"}
	case 'f':
		*f = field{'b', "false"}
	case '"':
		// Without escapes and with valid UTF-8 the text is the bytes between the quotes; otherwise
		// encoding/json unescapes it and replaces invalid UTF-8, which PostgreSQL would refuse.
		if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
			*f = field{'s', string(b[1 : len(b)-1])}
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = field{'s', s}
	case '{', '[':
		*f = field{kind: 'o'}
	default:
		*f = field{'n', string(b)}
	}
	return nil
}

// set reports whether the field was sent with a value.
func (f field) set() bool { return f.kind != 0 }

// str reads a field sent as a string or a number, as its text.
func (f field) str(name string) (string, error) {
	if f.kind == 'b' || f.kind == 'o' {
		return "", fault.Invalid(name, "%s must be a string or a number", name)
	}
	return f.text, nil
}

// digits reads a field that must hold only digits, sent as a string or as a non-negative integer.
func (f field) digits(name string) (string, error) {
	s, err := f.str(name)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", fault.Invalid(name, "%s must contain only digits", name)
		}
	}
	return s, nil
}

// flag reads a boolean sent as true/false or "true"/"false". Absent is false.
func (f field) flag(name string) (bool, error) {
	switch {
	case f.kind == 0:
		return false, nil
	case (f.kind == 'b' || f.kind == 's') && strings.EqualFold(f.text, "true"):
		return true, nil
	case (f.kind == 'b' || f.kind == 's') && strings.EqualFold(f.text, "false"):
		return false, nil
	}
	return false, fault.Invalid(name, "%s must be true or false", name)
}

// amount reads a decimal amount in c, exactly: a JSON number or a numeric string.
func (f field) amount(name string, c money.Currency) (int64, bool, error) {
	s, err := f.str(name)
	if err != nil {
		return 0, false, err
	}
	if s == "" {
		return 0, false, nil
	}
	v, err := money.Parse(s, c)
	if err != nil {
		return 0, true, fault.Invalid(name, "%s %s", name, err)
	}
	return v, true, nil
}

// currencyOf reads the currency field: an ISO 4217 code the merchant accepts, or the merchant's
// default when absent.
func currencyOf(f field, m merchant.Merchant) (money.Currency, error) {
	s, err := f.str("currency")
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

// customerFields is the optional customer detail of a request body.
type customerFields struct {
	Email       field `json:"email"`
	FirstName   field `json:"first_name"`
	LastName    field `json:"last_name"`
	Company     field `json:"company"`
	Telephone   field `json:"telephone"`
	Address1    field `json:"address1"`
	Address2    field `json:"address2"`
	City        field `json:"city"`
	Province    field `json:"province"`
	Country     field `json:"country"`
	PostalCode  field `json:"postal_code"`
	CustomID    field `json:"custom_id"`
	InvoiceID   field `json:"invoice_id"`
	OrderID     field `json:"order_id"`
	Description field `json:"description"`
}

// customer reads and bounds the customer detail. The e-mail address, when sent, must be one.
func (f customerFields) customer() (Customer, error) {
	var c Customer
	var err error
	read := func(dst *string, name string, f field, max int) {
		if err != nil {
			return
		}
		var s string
		if s, err = f.str(name); err != nil {
			return
		}
		s = strings.TrimSpace(s)
		if utf8.RuneCountInString(s) > max {
			err = fault.Invalid(name, "%s must be at most %d characters", name, max)
			return
		}
		*dst = s
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
	Amount          field `json:"amount"`
	Currency        field `json:"currency"`
	CardNumber      field `json:"card_number"`
	CardExpiryMonth field `json:"card_expiry_month"`
	CardExpiryYear  field `json:"card_expiry_year"`
	CVV2            field `json:"cvv2"`
	Token           field `json:"token"`
	TestMode        field `json:"test_mode"`
	customerFields
}

// charge validates the body into a Charge of kind for merchant m. Fields are checked in the order a
// person fills them in, and the first problem is reported. A body with a card token returns the token
// and a Charge without card: the caller opens the token.
func (b chargeBody) charge(kind string, m merchant.Merchant) (Charge, string, error) {
	c := Charge{Kind: kind}
	var err error
	token, err := b.Token.str("token")
	if err != nil {
		return c, "", err
	}
	if token != "" {
		// "Sending token together with any raw card field is a 400" (wire-contract.md, Transactions).
		for _, f := range []struct {
			name string
			f    field
		}{{"card_number", b.CardNumber}, {"card_expiry_month", b.CardExpiryMonth}, {"card_expiry_year", b.CardExpiryYear}, {"cvv2", b.CVV2}} {
			if f.f.set() {
				return c, "", fault.Invalid(f.name, "%s cannot be sent together with token: the token carries the card", f.name)
			}
		}
	}
	if c.Currency, err = currencyOf(b.Currency, m); err != nil {
		return c, "", err
	}
	amt, set, err := b.Amount.amount("amount", c.Currency)
	switch {
	case err != nil:
		return c, "", err
	case !set:
		return c, "", fault.Invalid("amount", "amount is required")
	case amt == 0 && kind == KindSale:
		return c, "", fault.Invalid("amount", "amount must be greater than 0")
	case !m.WithinMax(amt, c.Currency):
		return c, "", fault.Invalid("amount", "amount exceeds this merchant's maximum of %s", m.MaxAmount())
	}
	c.Amount = amt
	if token == "" {
		if c.Card, c.Expiry, c.CVV, err = cardFields(b.CardNumber, b.CardExpiryMonth, b.CardExpiryYear, b.CVV2); err != nil {
			return c, "", err
		}
	}
	if c.TestMode, err = b.TestMode.flag("test_mode"); err != nil {
		return c, "", err
	}
	c.Customer, err = b.customer()
	return c, token, err
}

// cardFields validates the four card fields.
func cardFields(number, month, year, cvv field) (card.Number, card.Expiry, string, error) {
	var none card.Number
	pan, err := number.digits("card_number")
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	if pan == "" {
		return none, card.Expiry{}, "", fault.Invalid("card_number", "card_number is required")
	}
	n, err := card.ParseNumber(pan)
	if err == nil {
		err = card.Validate(n)
	}
	if err != nil {
		return none, card.Expiry{}, "", fault.Invalid("card_number", "card_number %s", err)
	}
	mm, err := month.digits("card_expiry_month")
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	yy, err := year.digits("card_expiry_year")
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	switch {
	case mm == "":
		return none, card.Expiry{}, "", fault.Invalid("card_expiry_month", "card_expiry_month is required")
	case yy == "":
		return none, card.Expiry{}, "", fault.Invalid("card_expiry_year", "card_expiry_year is required")
	}
	exp, err := card.ParseExpiry(mm, yy)
	if err != nil {
		field := "card_expiry_year"
		if errors.Is(err, card.ErrMonth) {
			field = "card_expiry_month"
		}
		return none, card.Expiry{}, "", fault.Invalid(field, "%s %s", field, err)
	}
	brand := card.BrandOf(n)
	code, err := cvv.digits("cvv2")
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	if code == "" {
		return none, card.Expiry{}, "", fault.Invalid("cvv2", "cvv2 is required")
	}
	// A CVV sent as a JSON integer has lost its leading zeros ("012" became 12): restore them.
	if cvv.kind == 'n' {
		want := 3
		if brand == card.Amex {
			want = 4
		}
		for len(code) < want {
			code = "0" + code
		}
	}
	if err := card.ValidateCVV(code, brand); err != nil {
		return none, card.Expiry{}, "", fault.Invalid("cvv2", "cvv2 %s", err)
	}
	return n, exp, code, nil
}

// followUpBody is the body of capture, refund and void.
type followUpBody struct {
	Amount   field `json:"amount"`
	Currency field `json:"currency"`
	TestMode field `json:"test_mode"`
}

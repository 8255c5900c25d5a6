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

// Request fields arrive as json.RawMessage and are read by name, so that every error names its field
// and so that the shapes real clients send are accepted: "Be tolerant in what you accept"
// (wire-contract.md, General rules) — amounts as numbers or numeric strings, card fields as strings or
// integers, two- or four-digit years, flags as booleans or "true"/"false", unknown fields ignored.

// text reads a JSON string or number as its text. Absent and null are "".
func text(field string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fault.Invalid(field, "%s is not a valid JSON string", field)
		}
		return s, nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw), nil
	default:
		return "", fault.Invalid(field, "%s must be a string or a number", field)
	}
}

// digits reads a field that must hold only digits, sent as a string or as a non-negative integer.
func digits(field string, raw json.RawMessage) (string, error) {
	s, err := text(field, raw)
	if err != nil || s == "" {
		return s, err
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", fault.Invalid(field, "%s must contain only digits", field)
		}
	}
	return s, nil
}

// flag reads a boolean sent as true/false or "true"/"false". Absent and null are false.
func flag(field string, raw json.RawMessage) (bool, error) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	switch strings.ToLower(s) {
	case "", "null", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fault.Invalid(field, "%s must be true or false", field)
}

// amount reads a decimal amount in c, exactly: a JSON number or a numeric string.
func amount(field string, raw json.RawMessage, c money.Currency) (int64, bool, error) {
	s, err := text(field, raw)
	if err != nil {
		return 0, false, err
	}
	if s == "" {
		return 0, false, nil
	}
	v, err := money.Parse(s, c)
	if err != nil {
		return 0, true, fault.Invalid(field, "%s %s", field, err)
	}
	return v, true, nil
}

// currencyOf reads the currency field: an ISO 4217 code the merchant accepts, or the merchant's
// default when absent.
func currencyOf(raw json.RawMessage, m merchant.Merchant) (money.Currency, error) {
	s, err := text("currency", raw)
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
	Email       json.RawMessage `json:"email"`
	FirstName   json.RawMessage `json:"first_name"`
	LastName    json.RawMessage `json:"last_name"`
	Company     json.RawMessage `json:"company"`
	Telephone   json.RawMessage `json:"telephone"`
	Address1    json.RawMessage `json:"address1"`
	Address2    json.RawMessage `json:"address2"`
	City        json.RawMessage `json:"city"`
	Province    json.RawMessage `json:"province"`
	Country     json.RawMessage `json:"country"`
	PostalCode  json.RawMessage `json:"postal_code"`
	CustomID    json.RawMessage `json:"custom_id"`
	InvoiceID   json.RawMessage `json:"invoice_id"`
	OrderID     json.RawMessage `json:"order_id"`
	Description json.RawMessage `json:"description"`
}

// customer reads and bounds the customer detail. The e-mail address, when sent, must be one.
func (f customerFields) customer() (Customer, error) {
	var c Customer
	var err error
	read := func(dst *string, field string, raw json.RawMessage, max int) {
		if err != nil {
			return
		}
		var s string
		if s, err = text(field, raw); err != nil {
			return
		}
		s = strings.TrimSpace(s)
		if utf8.RuneCountInString(s) > max {
			err = fault.Invalid(field, "%s must be at most %d characters", field, max)
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
	Amount          json.RawMessage `json:"amount"`
	Currency        json.RawMessage `json:"currency"`
	CardNumber      json.RawMessage `json:"card_number"`
	CardExpiryMonth json.RawMessage `json:"card_expiry_month"`
	CardExpiryYear  json.RawMessage `json:"card_expiry_year"`
	CVV2            json.RawMessage `json:"cvv2"`
	Token           json.RawMessage `json:"token"`
	TestMode        json.RawMessage `json:"test_mode"`
	customerFields
}

// charge validates the body into a Charge of kind for merchant m. Fields are checked in the order a
// person fills them in, and the first problem is reported.
func (b chargeBody) charge(kind string, m merchant.Merchant) (Charge, error) {
	c := Charge{Kind: kind}
	var err error
	if present(b.Token) {
		return c, fault.Invalid("token", "token is not supported yet: send card_number, card_expiry_month, card_expiry_year and cvv2")
	}
	if c.Currency, err = currencyOf(b.Currency, m); err != nil {
		return c, err
	}
	amt, set, err := amount("amount", b.Amount, c.Currency)
	switch {
	case err != nil:
		return c, err
	case !set:
		return c, fault.Invalid("amount", "amount is required")
	case amt == 0 && kind == KindSale:
		return c, fault.Invalid("amount", "amount must be greater than 0")
	case !m.WithinMax(amt, c.Currency):
		return c, fault.Invalid("amount", "amount exceeds this merchant's maximum of %s", m.MaxAmount())
	}
	c.Amount = amt
	if c.Card, c.Expiry, c.CVV, err = cardFields(b.CardNumber, b.CardExpiryMonth, b.CardExpiryYear, b.CVV2); err != nil {
		return c, err
	}
	if c.TestMode, err = flag("test_mode", b.TestMode); err != nil {
		return c, err
	}
	c.Customer, err = b.customer()
	return c, err
}

// cardFields validates the four card fields.
func cardFields(number, month, year, cvv json.RawMessage) (card.Number, card.Expiry, string, error) {
	var none card.Number
	pan, err := digits("card_number", number)
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
	mm, err := digits("card_expiry_month", month)
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	yy, err := digits("card_expiry_year", year)
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
	code, err := digits("cvv2", cvv)
	if err != nil {
		return none, card.Expiry{}, "", err
	}
	if code == "" {
		return none, card.Expiry{}, "", fault.Invalid("cvv2", "cvv2 is required")
	}
	// A CVV sent as a JSON integer has lost its leading zeros ("012" became 12): restore them.
	if raw := bytes.TrimSpace(cvv); len(raw) > 0 && raw[0] != '"' {
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

func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// followUpBody is the body of capture, refund and void.
type followUpBody struct {
	Amount   json.RawMessage `json:"amount"`
	Currency json.RawMessage `json:"currency"`
	TestMode json.RawMessage `json:"test_mode"`
}

package vault

import (
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
)

// The request that creates a payment method (POST /v1/payment-methods):
//
//	{"type": "card",
//	 "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"},
//	 "billing_details": {"name", "email", "phone",
//	                     "address": {"line1", "line2", "city", "state", "postal_code", "country"}}}
//
// The address's postal_code may be sent as zip, the hosted-page session's name for it; responses
// spell it postal_code.
//
// It is read strictly, like every v1 body: an unknown field or a value of another JSON type is a 400
// naming the field by its path.

// MethodRequest is the decoded body of a payment-method creation.
type MethodRequest struct {
	Type           *string         `json:"type"`
	Card           *CardRequest    `json:"card"`
	BillingDetails *BillingDetails `json:"billing_details"`
}

// CardRequest is the card of a MethodRequest.
type CardRequest struct {
	Number   *string `json:"number"`
	ExpMonth *int64  `json:"exp_month"`
	ExpYear  *int64  `json:"exp_year"`
	CVC      *string `json:"cvc"`
}

// UnmarshalJSON reads the card strictly.
func (c *CardRequest) UnmarshalJSON(b []byte) error {
	type plain CardRequest
	return httpapi.UnmarshalStrict(b, (*plain)(c), "card.")
}

// BillingDetails is the cardholder's billing information; every field is optional.
type BillingDetails struct {
	Name    *string  `json:"name"`
	Email   *string  `json:"email"`
	Phone   *string  `json:"phone"`
	Address *Address `json:"address"`
}

// UnmarshalJSON reads billing details strictly.
func (d *BillingDetails) UnmarshalJSON(b []byte) error {
	type plain BillingDetails
	return httpapi.UnmarshalStrict(b, (*plain)(d), "billing_details.")
}

// Address is a billing address.
type Address struct {
	Line1      *string `json:"line1"`
	Line2      *string `json:"line2"`
	City       *string `json:"city"`
	State      *string `json:"state"`
	PostalCode *string `json:"postal_code"`
	Zip        *string `json:"zip"` // postal_code under the hosted-page session's name
	Country    *string `json:"country"`
}

// UnmarshalJSON reads an address strictly.
func (a *Address) UnmarshalJSON(b []byte) error {
	type plain Address
	return httpapi.UnmarshalStrict(b, (*plain)(a), "billing_details.address.")
}

// NewMethod is a validated payment method to store. CVC is checked and handed back to the caller,
// never stored (PCI DSS 3.3.1).
type NewMethod struct {
	Number  card.Number
	Expiry  card.Expiry
	CVC     string
	Billing Billing
}

// Billing is validated billing details; "" is absent.
type Billing struct {
	Name       string `json:"name,omitempty"`
	Email      string `json:"email,omitempty"`
	Phone      string `json:"phone,omitempty"`
	Line1      string `json:"line1,omitempty"`
	Line2      string `json:"line2,omitempty"`
	City       string `json:"city,omitempty"`
	State      string `json:"state,omitempty"`
	PostalCode string `json:"postal_code,omitempty"`
	Country    string `json:"country,omitempty"`
}

// ParseMethodRequest reads and validates the body of a payment-method creation at time now. Every
// failure is a 400 naming the field.
func ParseMethodRequest(body []byte, now time.Time) (NewMethod, error) {
	var r MethodRequest
	if err := httpapi.UnmarshalStrict(body, &r, ""); err != nil {
		return NewMethod{}, err
	}
	return r.validate(now)
}

func (r MethodRequest) validate(now time.Time) (NewMethod, error) {
	var nm NewMethod
	switch {
	case r.Type == nil:
		return nm, fault.Invalid("type", "type is required; the one type is card")
	case *r.Type != "card":
		return nm, fault.Invalid("type", "type must be card: only card payments are supported")
	case r.Card == nil:
		return nm, fault.Invalid("card", "card is required with type card")
	}
	c := *r.Card
	if c.Number == nil {
		return nm, fault.Invalid("card.number", "card.number is required")
	}
	n, err := card.ParseNumber(*c.Number)
	if err == nil {
		err = card.Validate(n)
	}
	if err != nil {
		return nm, fault.Invalid("card.number", "card.number %s", err)
	}
	nm.Number = n
	switch {
	case c.ExpMonth == nil:
		return nm, fault.Invalid("card.exp_month", "card.exp_month is required")
	case *c.ExpMonth < 1 || *c.ExpMonth > 12:
		return nm, fault.Invalid("card.exp_month", "card.exp_month must be a month from 1 to 12")
	case c.ExpYear == nil:
		return nm, fault.Invalid("card.exp_year", "card.exp_year is required")
	}
	year := *c.ExpYear
	if year >= 0 && year < 100 {
		year += 2000
	}
	if year < 2000 || year > 2199 {
		return nm, fault.Invalid("card.exp_year", "card.exp_year must be a year such as %d", now.Year()+3)
	}
	nm.Expiry = card.Expiry{Month: int(*c.ExpMonth), Year: int(year)}
	if nm.Expiry.Expired(now) {
		f := "card.exp_year"
		if nm.Expiry.Year == now.UTC().Year() {
			f = "card.exp_month"
		}
		return nm, fault.Invalid(f, "the card expired at the end of %s", nm.Expiry)
	}
	if c.CVC != nil {
		if err := card.ValidateCVV(*c.CVC, card.BrandOf(n)); err != nil {
			return nm, fault.Invalid("card.cvc", "card.cvc %s", err)
		}
		nm.CVC = *c.CVC
	}
	if r.BillingDetails != nil {
		if nm.Billing, err = r.BillingDetails.validate(); err != nil {
			return nm, err
		}
	}
	return nm, nil
}

func (d BillingDetails) validate() (Billing, error) {
	var b Billing
	var t httpapi.Texts
	text := t.Read
	const p = "billing_details."
	b.Name = text(p+"name", d.Name, 200)
	b.Email = text(p+"email", d.Email, 254)
	if t.Err == nil && b.Email != "" {
		if e := merchant.ValidateEmail(b.Email); e != nil {
			t.Err = fault.Invalid(p+"email", "%semail %s", p, e)
		}
	}
	b.Phone = text(p+"phone", d.Phone, 50)
	if a := d.Address; a != nil {
		const pa = p + "address."
		b.Line1 = text(pa+"line1", a.Line1, 200)
		b.Line2 = text(pa+"line2", a.Line2, 200)
		b.City = text(pa+"city", a.City, 100)
		b.State = text(pa+"state", a.State, 100)
		name, postal, err := httpapi.OneOf(pa+"postal_code", a.PostalCode, pa+"zip", a.Zip)
		if t.Err == nil {
			t.Err = err
		}
		b.PostalCode = text(name, postal, 20)
		b.Country = strings.ToUpper(text(pa+"country", a.Country, 2))
		if t.Err == nil && b.Country != "" && (len(b.Country) != 2 || b.Country[0] < 'A' || b.Country[0] > 'Z' || b.Country[1] < 'A' || b.Country[1] > 'Z') {
			t.Err = fault.Invalid(pa+"country", "%scountry must be a two-letter country code (ISO 3166-1 alpha-2), such as CA", pa)
		}
	}
	return b, t.Err
}

package invoice

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
)

// Limits of an invoice body.
const (
	MaxItems        = 100
	maxCustomFields = 20
)

// Body is the body of invoice create and update (PUT: absent fields keep their values). Values are
// read as real clients send them (internal/field): amounts as numbers or numeric strings, flags as
// booleans or "true"/"false"; unknown fields are ignored.
type Body struct {
	InvoiceNumber      field.Value     `json:"invoice_number"`
	Status             field.Value     `json:"status"`
	DueDate            field.Value     `json:"due_date"`
	Items              json.RawMessage `json:"items"`
	Currency           field.Value     `json:"currency"`
	TaxRate            field.Value     `json:"tax_rate"`
	DiscountAmount     field.Value     `json:"discount_amount"`
	ShippingAmount     field.Value     `json:"shipping_amount"`
	SubtotalAmount     field.Value     `json:"subtotal_amount"`
	TaxAmount          field.Value     `json:"tax_amount"`
	TotalAmount        field.Value     `json:"total_amount"`
	CustomerLookupID   field.Value     `json:"customer_lookup_id"`
	CustomerEmail      field.Value     `json:"customer_email"`
	CustomerFirstName  field.Value     `json:"customer_first_name"`
	CustomerLastName   field.Value     `json:"customer_last_name"`
	CustomerCompany    field.Value     `json:"customer_company"`
	CustomerTelephone  field.Value     `json:"customer_telephone"`
	CustomerAddress1   field.Value     `json:"customer_address1"`
	CustomerAddress2   field.Value     `json:"customer_address2"`
	CustomerCity       field.Value     `json:"customer_city"`
	CustomerProvince   field.Value     `json:"customer_province"`
	CustomerCountry    field.Value     `json:"customer_country"`
	CustomerPostalCode field.Value     `json:"customer_postal_code"`
	Notes              field.Value     `json:"notes"`
	Terms              field.Value     `json:"terms"`
	CustomFields       json.RawMessage `json:"custom_fields"`
	ReminderDays       json.RawMessage `json:"reminder_days"`
	SendEmail          field.Value     `json:"send_email"`
}

// itemBody is a line of the body.
type itemBody struct {
	Description field.Value `json:"description"`
	Quantity    field.Value `json:"quantity"`
	UnitPrice   field.Value `json:"unit_price"`
	SKU         field.Value `json:"sku"`
	TotalAmount field.Value `json:"total_amount"`
	TaxAmount   field.Value `json:"tax_amount"`
}

// ParseBody decodes an invoice body: a 400 for what is not a JSON object, or a field of the wrong
// kind. Text with a NUL or invalid UTF-8 is refused by name when its field is read (field.Value).
func ParseBody(raw []byte) (Body, error) {
	var b Body
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		var te *json.UnmarshalTypeError
		var fe *fault.Error
		switch {
		case errors.As(err, &fe):
			return Body{}, fe
		case errors.As(err, &te) && te.Field != "":
			return Body{}, fault.Invalid(te.Field, "%s must be %s, not a JSON %s", te.Field, te.Type.Kind().String(), te.Value)
		case errors.As(err, &te):
			return Body{}, fault.BadRequest("invalid_json", "The request body must be a JSON object, not a JSON %s.", te.Value)
		}
		return Body{}, fault.BadRequest("invalid_json", "The request body is not valid JSON: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	return b, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// amount reads a non-negative amount in c; absent or "" is not set.
func amount(f field.Value, name string, c money.Currency) (int64, bool, error) {
	v, set, err := f.Amount(name, c)
	if err != nil {
		return 0, true, err
	}
	return v, set, nil
}

// text reads an optional text field of at most max characters into dst when it is sent.
func text(f field.Value, name string, max int, dst *string) error {
	if !f.Set() {
		return nil
	}
	v, err := f.Text(name, max)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// Apply validates the fields b sends into inv, for merchant m, and computes the totals. On create
// (create true) items are required and status may only be DRAFT. Every error is a 400 naming its
// field. Status changes are the caller's: Apply only checks that status is a status.
func (b Body) Apply(inv *Invoice, m merchant.Merchant, create bool) error {
	// The currency first: the amounts are read in its decimals.
	if b.Currency.Set() || create {
		c, err := payment.CurrencyOf(b.Currency, m)
		if err != nil {
			return err
		}
		if !create && c != inv.Currency {
			// Amounts kept in the old currency's minor units mean nothing in the new one.
			if isNull(b.Items) {
				return fault.Invalid("items", "items are required when the currency changes")
			}
			if inv.Discount != 0 && !b.DiscountAmount.Set() {
				return fault.Invalid("discount_amount", "discount_amount is required when the currency changes")
			}
			if inv.Shipping != 0 && !b.ShippingAmount.Set() {
				return fault.Invalid("shipping_amount", "shipping_amount is required when the currency changes")
			}
		}
		inv.Currency = c
	}
	c := inv.Currency
	if b.Status.Set() {
		s, err := b.Status.Str("status")
		if err != nil {
			return err
		}
		st, ok := ParseStatus(s)
		switch {
		case !ok:
			return fault.Invalid("status", "status must be DRAFT, SENT, PAID, OVERDUE or CANCELLED")
		case create && st != Draft:
			return fault.Invalid("status", "a new invoice is a DRAFT: send it to make it SENT (send_email, or POST .../send)")
		}
	}
	if b.InvoiceNumber.Set() {
		n, err := b.InvoiceNumber.Text("invoice_number", 50)
		if err != nil {
			return err
		}
		if n == "" {
			return fault.Invalid("invoice_number", "invoice_number must not be empty")
		}
		inv.Number = n
	}
	if b.DueDate.Set() {
		s, err := b.DueDate.Text("due_date", 10)
		if err != nil {
			return err
		}
		if s != "" {
			if _, err := time.Parse(time.DateOnly, s); err != nil {
				return fault.Invalid("due_date", "due_date must be a date YYYY-MM-DD")
			}
		}
		inv.DueDate = s
	}
	if err := b.applyRate(inv); err != nil {
		return err
	}
	var lines []itemBody
	if !isNull(b.Items) || create {
		var err error
		if lines, err = parseItems(b.Items); err != nil {
			return err
		}
		inv.Items = make([]Item, len(lines))
		for i, l := range lines {
			if inv.Items[i], err = l.item(i, c); err != nil {
				return err
			}
		}
	}
	if err := b.applyAmounts(inv); err != nil {
		return err
	}
	cu := &inv.Customer
	for _, f := range []struct {
		in   field.Value
		name string
		max  int
		dst  *string
	}{
		{b.CustomerLookupID, "customer_lookup_id", 10, &cu.LookupID}, {b.CustomerEmail, "customer_email", 254, &cu.Email},
		{b.CustomerFirstName, "customer_first_name", 100, &cu.FirstName}, {b.CustomerLastName, "customer_last_name", 100, &cu.LastName},
		{b.CustomerCompany, "customer_company", 200, &cu.Company}, {b.CustomerTelephone, "customer_telephone", 50, &cu.Telephone},
		{b.CustomerAddress1, "customer_address1", 200, &cu.Address1}, {b.CustomerAddress2, "customer_address2", 200, &cu.Address2},
		{b.CustomerCity, "customer_city", 100, &cu.City}, {b.CustomerProvince, "customer_province", 100, &cu.Province},
		{b.CustomerCountry, "customer_country", 100, &cu.Country}, {b.CustomerPostalCode, "customer_postal_code", 20, &cu.PostalCode},
		{b.Notes, "notes", 5000, &inv.Notes}, {b.Terms, "terms", 5000, &inv.Terms},
	} {
		if err := text(f.in, f.name, f.max, f.dst); err != nil {
			return err
		}
	}
	if b.CustomerEmail.Set() && cu.Email != "" {
		if err := merchant.ValidateEmail(cu.Email); err != nil {
			return fault.Invalid("customer_email", "customer_email %s", err)
		}
	}
	if !isNull(b.CustomFields) {
		cf, err := parseCustomFields(b.CustomFields)
		if err != nil {
			return err
		}
		inv.CustomFields = cf
	}
	switch {
	case !isNull(b.ReminderDays):
		days, err := parseReminderDays(b.ReminderDays)
		if err != nil {
			return err
		}
		inv.ReminderDays = days
	case create:
		inv.ReminderDays = slices.Clone(DefaultReminderDays)
	}
	if _, err := b.SendEmail.Flag("send_email"); err != nil {
		return err
	}
	return b.totals(inv, lines, m)
}

// applyRate reads tax_rate into inv when it is sent.
func (b Body) applyRate(inv *Invoice) error {
	if !b.TaxRate.Set() {
		return nil
	}
	s, err := b.TaxRate.Str("tax_rate")
	if err != nil {
		return err
	}
	r, err := parseDecimal(s, RateScale)
	if err != nil {
		return fault.Invalid("tax_rate", "tax_rate (a percentage) %s", err)
	}
	if r > maxRate {
		return fault.Invalid("tax_rate", "tax_rate is a percentage from 0 to 100")
	}
	inv.TaxRate = r
	return nil
}

// applyAmounts reads discount_amount and shipping_amount, in inv's currency, into inv when they are
// sent.
func (b Body) applyAmounts(inv *Invoice) error {
	for _, a := range []struct {
		f    field.Value
		name string
		dst  *int64
	}{{b.DiscountAmount, "discount_amount", &inv.Discount}, {b.ShippingAmount, "shipping_amount", &inv.Shipping}} {
		if v, set, err := amount(a.f, a.name, inv.Currency); err != nil {
			return err
		} else if set {
			*a.dst = v
		}
	}
	return nil
}

// totals computes inv's totals and checks them, and those the client sent, against the rule.
func (b Body) totals(inv *Invoice, lines []itemBody, m merchant.Merchant) error {
	c := inv.Currency
	if !compute(inv) {
		return fault.Invalid("total_amount", "the invoice's amounts are too large")
	}
	for i, l := range lines {
		it := inv.Items[i]
		for _, s := range []struct {
			f    field.Value
			name string
			want int64
		}{{l.TotalAmount, "total_amount", it.Total}, {l.TaxAmount, "tax_amount", it.Tax}} {
			name := "items[" + strconv.Itoa(i) + "]." + s.name
			v, set, err := amount(s.f, name, c)
			if err != nil {
				return err
			}
			if set && v != s.want {
				return fault.Invalid(name, "%s is %s, not %s: quantity × unit_price, then tax at tax_rate, each rounded half up to the currency's minor unit",
					name, money.Format(s.want, c), money.Format(v, c))
			}
		}
	}
	tol := tolerance(len(inv.Items))
	for _, s := range []struct {
		f    field.Value
		name string
		want int64
		tol  int64
	}{{b.SubtotalAmount, "subtotal_amount", inv.Totals.Subtotal, 0}, {b.TaxAmount, "tax_amount", inv.Totals.Tax, tol},
		{b.TotalAmount, "total_amount", inv.Totals.Total, tol}} {
		v, set, err := amount(s.f, s.name, c)
		if err != nil {
			return err
		}
		if set && (v < s.want-s.tol || v > s.want+s.tol) {
			return fault.Invalid(s.name, "%s is %s, not %s (Kassa computes every total: see docs/guides/payments/invoices.md)",
				s.name, money.Format(s.want, c), money.Format(v, c))
		}
	}
	switch {
	case inv.Totals.Total <= 0 && inv.Discount > 0:
		return fault.Invalid("discount_amount", "discount_amount leaves nothing to pay: the total must be greater than 0")
	case inv.Totals.Total <= 0:
		return fault.Invalid("items", "the invoice's total must be greater than 0")
	case !m.WithinMax(inv.Totals.Total, c):
		return fault.Invalid("total_amount", "total_amount exceeds this merchant's maximum of %s", m.MaxAmount())
	}
	return nil
}

// parseItems reads the items array: 1 to MaxItems lines, each an object.
func parseItems(raw json.RawMessage) ([]itemBody, error) {
	if isNull(raw) {
		return nil, fault.Invalid("items", "items are required: at least one line")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, fault.Invalid("items", "items must be an array of lines")
	}
	switch {
	case len(elems) == 0:
		return nil, fault.Invalid("items", "items are required: at least one line")
	case len(elems) > MaxItems:
		return nil, fault.Invalid("items", "an invoice has at most %d lines", MaxItems)
	}
	out := make([]itemBody, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			var fe *fault.Error
			if errors.As(err, &fe) {
				return nil, fe
			}
			return nil, fault.Invalid("items["+strconv.Itoa(i)+"]", "items[%d] must be an object", i)
		}
	}
	return out, nil
}

// item validates a line.
func (l itemBody) item(i int, c money.Currency) (Item, error) {
	p := "items[" + strconv.Itoa(i) + "]."
	var it Item
	var err error
	if it.Description, err = l.Description.Text(p+"description", 500); err != nil {
		return it, err
	}
	if it.Description == "" {
		return it, fault.Invalid(p+"description", "%sdescription is required", p)
	}
	if it.SKU, err = l.SKU.Text(p+"sku", 100); err != nil {
		return it, err
	}
	it.Quantity = 1000
	if l.Quantity.Set() {
		s, err := l.Quantity.Str(p + "quantity")
		if err != nil {
			return it, err
		}
		if it.Quantity, err = parseDecimal(s, QuantityScale); err != nil {
			return it, fault.Invalid(p+"quantity", "%squantity %s", p, err)
		}
		if it.Quantity == 0 || it.Quantity > maxQuantity {
			return it, fault.Invalid(p+"quantity", "%squantity must be greater than 0 and at most 1000000", p)
		}
	}
	v, set, err := amount(l.UnitPrice, p+"unit_price", c)
	if err != nil {
		return it, err
	}
	if !set {
		return it, fault.Invalid(p+"unit_price", "%sunit_price is required", p)
	}
	it.UnitPrice = v
	return it, nil
}

// parseCustomFields reads custom_fields: an object of at most 20 strings, keys of at most 40
// characters, values of at most 500.
func parseCustomFields(raw json.RawMessage) (map[string]string, error) {
	if !httpapi.StorableJSON(raw) {
		return nil, httpapi.UnstorableText("custom_fields")
	}
	var m map[string]field.Value
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fault.Invalid("custom_fields", "custom_fields must be an object of strings")
	}
	if len(m) > maxCustomFields {
		return nil, fault.Invalid("custom_fields", "custom_fields holds at most %d fields", maxCustomFields)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k == "" || utf8.RuneCountInString(k) > 40 || !httpapi.Storable(k) {
			return nil, fault.Invalid("custom_fields", "custom_fields' names are 1 to 40 characters of text")
		}
		s, err := v.Text("custom_fields."+k, 500)
		if err != nil {
			return nil, fault.Invalid("custom_fields", "custom_fields.%s must be a string of at most 500 characters", k)
		}
		out[k] = s
	}
	return out, nil
}

package checkout

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// The bodies of the payment-intent routes are read strictly (httpapi.UnmarshalStrict): amounts are
// JSON integers in minor units, an unknown field is a 400 naming it, and every rule below is a 400
// naming its field.

// Limits of payment-intent fields.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
	maxDescription      = 1000
	maxSuffix           = 22
)

// IntentBody is the body that creates or updates a payment intent. A hosted-page session's body has
// the same fields ("every payment-intent field is accepted and validated as there").
type IntentBody struct {
	Amount                    *int64            `json:"amount"`
	Currency                  *string           `json:"currency"`
	CaptureMethod             *string           `json:"capture_method"`
	Metadata                  map[string]string `json:"metadata"`
	Description               *string           `json:"description"`
	ReceiptEmail              *string           `json:"receipt_email"`
	StatementDescriptorSuffix *string           `json:"statement_descriptor_suffix"`
	PaymentMethod             *string           `json:"payment_method"`
	PaymentMethodTypes        *[]string         `json:"payment_method_types"`
}

// ParseIntentBody decodes a create or update body strictly.
func ParseIntentBody(body []byte) (IntentBody, error) {
	var b IntentBody
	err := httpapi.UnmarshalStrict(body, &b, "")
	return b, err
}

// IntentParams are the validated fields of a new intent.
type IntentParams struct {
	Amount                    int64
	Currency                  money.Currency
	CaptureMethod             string
	Metadata                  map[string]string
	Description               string
	ReceiptEmail              string
	StatementDescriptorSuffix string
	PaymentMethod             string
}

// Params validates a creation for merchant m: amount and currency are required.
func (b IntentBody) Params(m merchant.Merchant) (IntentParams, error) {
	if b.Amount == nil {
		return IntentParams{}, fault.Invalid("amount", "amount is required: an integer in the currency's minor unit (1000 is 10.00 CAD)")
	}
	if b.Currency == nil {
		return IntentParams{}, fault.Invalid("currency", "currency is required: a lower-case ISO 4217 code the account accepts, such as %s",
			strings.ToLower(m.DefaultCurrency))
	}
	var p IntentParams
	in := Intent{CaptureMethod: CaptureAutomatic, Metadata: map[string]string{}}
	if err := b.apply(&in, m); err != nil {
		return IntentParams{}, err
	}
	p.Amount, p.Currency, p.CaptureMethod, p.Metadata = in.Amount, in.Currency, in.CaptureMethod, in.Metadata
	p.Description, p.ReceiptEmail, p.StatementDescriptorSuffix = in.Description, in.ReceiptEmail, in.StatementDescriptorSuffix
	p.PaymentMethod = in.PaymentMethod
	return p, nil
}

// apply validates the fields that are set and writes them into in. Metadata merges: a key with an
// empty value is removed. A text field set to "" is cleared.
func (b IntentBody) apply(in *Intent, m merchant.Merchant) error {
	if b.Amount != nil && *b.Amount <= 0 {
		return fault.Invalid("amount", "amount must be a positive integer in the currency's minor unit")
	}
	if b.Currency != nil {
		c, err := currencyOf(*b.Currency, m)
		if err != nil {
			return err
		}
		in.Currency = c
	}
	if b.Amount != nil {
		in.Amount = *b.Amount
	}
	if b.Amount != nil || b.Currency != nil {
		// The maximum is the merchant's, whatever the currency's decimals (merchant.Settings.WithinMax).
		if in.Amount > money.MaxMinor || !m.WithinMax(in.Amount, in.Currency) {
			return fault.Invalid("amount", "amount exceeds this account's maximum of %s in major units", m.MaxAmount())
		}
	}
	if b.CaptureMethod != nil {
		switch *b.CaptureMethod {
		case CaptureAutomatic, CaptureManual:
			in.CaptureMethod = *b.CaptureMethod
		default:
			return fault.Invalid("capture_method", "capture_method must be automatic or manual")
		}
	}
	if b.PaymentMethodTypes != nil {
		// "Payment method types: card only" (hosted-payment-page-api.md, "Limits").
		if t := *b.PaymentMethodTypes; len(t) != 1 || t[0] != "card" {
			return fault.Invalid("payment_method_types", `payment_method_types must be ["card"]: only card payments are supported`)
		}
	}
	var err error
	if b.Metadata != nil {
		if in.Metadata, err = mergeMetadata(in.Metadata, b.Metadata); err != nil {
			return err
		}
	}
	if b.Description != nil {
		if in.Description, err = text("description", *b.Description, maxDescription); err != nil {
			return err
		}
	}
	if b.ReceiptEmail != nil {
		e := strings.TrimSpace(*b.ReceiptEmail)
		if e != "" {
			if err := merchant.ValidateEmail(e); err != nil {
				return fault.Invalid("receipt_email", "receipt_email %s", err)
			}
		}
		in.ReceiptEmail = e
	}
	if b.StatementDescriptorSuffix != nil {
		if in.StatementDescriptorSuffix, err = suffix(*b.StatementDescriptorSuffix); err != nil {
			return err
		}
	}
	if b.PaymentMethod != nil {
		if *b.PaymentMethod == "" {
			return fault.Invalid("payment_method", "payment_method must be the id of a payment method (pm_…)")
		}
		in.PaymentMethod = *b.PaymentMethod
	}
	return nil
}

// currencyOf reads a currency: three lower-case letters, an ISO 4217 code, accepted by the merchant.
func currencyOf(s string, m merchant.Merchant) (money.Currency, error) {
	if len(s) != 3 || strings.ToLower(s) != s {
		return money.Currency{}, fault.Invalid("currency", "currency must be a lower-case three-letter ISO 4217 code, such as %s",
			strings.ToLower(m.DefaultCurrency))
	}
	c, ok := money.Lookup(s)
	if !ok {
		return money.Currency{}, fault.Invalid("currency", "currency %q is not an ISO 4217 currency code", s)
	}
	if !m.Accepts(c.Code) {
		accepted := make([]string, len(m.Currencies))
		for i, a := range m.Currencies {
			accepted[i] = strings.ToLower(a)
		}
		return money.Currency{}, fault.Invalid("currency", "currency %s is not enabled for this account (enabled: %s)", s, strings.Join(accepted, ", "))
	}
	return c, nil
}

// mergeMetadata returns cur with the pairs of set: a key with an empty value is removed. Each pair is
// checked (metadataEntry), and so is the number of keys of the result.
func mergeMetadata(cur, set map[string]string) (map[string]string, error) {
	md := make(map[string]string, len(cur)+len(set))
	for k, v := range cur {
		md[k] = v
	}
	for k, v := range set {
		if err := metadataEntry(k, v); err != nil {
			return nil, err
		}
		if v == "" {
			delete(md, k)
		} else {
			md[k] = v
		}
	}
	if len(md) > maxMetadataKeys {
		return nil, fault.Invalid("metadata", "metadata may hold at most %d keys", maxMetadataKeys)
	}
	return md, nil
}

// metadataEntry checks one metadata pair: "at most 50 keys of ≤ 40 characters with string values of
// ≤ 500".
func metadataEntry(k, v string) error {
	switch {
	case k == "" || utf8.RuneCountInString(k) > maxMetadataKeyLen || !utf8.ValidString(k):
		return fault.Invalid("metadata", "metadata keys must be 1 to %d characters; %.50q is not", maxMetadataKeyLen, k)
	case utf8.RuneCountInString(v) > maxMetadataValueLen || !utf8.ValidString(v):
		return fault.Invalid("metadata", "metadata values must be at most %d characters; that of %q is longer", maxMetadataValueLen, k)
	}
	return nil
}

// text checks a free-text field: valid UTF-8 without control characters, at most max characters.
func text(name, s string, max int) (string, error) {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > max || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }) >= 0 {
		return "", fault.Invalid(name, "%s must be at most %d characters of text", name, max)
	}
	return s, nil
}

// suffix checks a statement descriptor suffix: what card statements show after the merchant's name,
// so at most 22 Latin characters, at least one a letter, none of < > \ ' " *.
func suffix(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || strings.IndexByte(`<>\'"*`, c) >= 0 {
			return "", fault.Invalid("statement_descriptor_suffix", `statement_descriptor_suffix must be printable ASCII without < > \ ' " *`)
		}
		letter = letter || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	if len(s) > maxSuffix || !letter {
		return "", fault.Invalid("statement_descriptor_suffix", "statement_descriptor_suffix must be 1 to %d characters with at least one letter", maxSuffix)
	}
	return s, nil
}

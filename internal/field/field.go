// Package field reads the values of JSON request bodies as real clients send them: "Be tolerant in
// what you accept" (wire-contract.md, General rules) — amounts as numbers or numeric strings, card
// fields as strings or integers, two- or four-digit years, flags as booleans or "true"/"false". Every
// error is a *fault.Error naming its field.
package field

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/money"
)

// Value is one value of a request body, read once while the body is decoded: its JSON kind and, for
// a string or a number, its text. Absent and null are the zero Value.
type Value struct {
	kind byte   // 0 absent or null, 's' string, 'n' number, 'b' boolean, 'o' object or array, 'x' unstorable text
	text string // the string's value, the number's literal, or "true"/"false"
}

// UnmarshalJSON keeps the value's kind and text.
func (f *Value) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case 'n':
		*f = Value{}
	case 't':
		*f = Value{'b', "true"}
	case 'f':
		*f = Value{'b', "false"}
	case '"':
		// Without escapes and with valid UTF-8 the text is the bytes between the quotes.
		if bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
			*f = Value{'s', string(b[1 : len(b)-1])}
			return nil
		}
		// Otherwise encoding/json unescapes it, and would silently replace invalid UTF-8 (which
		// PostgreSQL refuses and SQLite stores) with U+FFFD: such text, or a NUL, is kept aside as
		// unstorable, and refused by name when the field is read.
		if !httpapi.StorableJSON(b) {
			*f = Value{kind: 'x'}
			return nil
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = Value{'s', s}
	case '{', '[':
		*f = Value{kind: 'o'}
	default:
		*f = Value{'n', string(b)}
	}
	return nil
}

// Form is the Value of a field of an HTML form (the dashboard's), read by the API's rules: text, as a
// JSON string would bring it. Text that no database keeps as sent (a NUL, invalid UTF-8) is refused by
// name when the field is read, as in a JSON body.
func Form(text string) Value {
	if !httpapi.Storable(text) {
		return Value{kind: 'x'}
	}
	return Value{'s', text}
}

// Set reports whether the field was sent with a value.
func (f Value) Set() bool { return f.kind != 0 }

// Str reads a field sent as a string or a number, as its text.
func (f Value) Str(name string) (string, error) {
	switch f.kind {
	case 'b', 'o':
		return "", fault.Invalid(name, "%s must be a string or a number", name)
	case 'x':
		// Text fields of the gateway API reject NUL bytes and invalid UTF-8 with a 400 naming the
		// field: no database keeps such text as sent.
		return "", httpapi.UnstorableText(name)
	}
	return f.text, nil
}

// Digits reads a field that must hold only digits, sent as a string or as a non-negative integer.
func (f Value) Digits(name string) (string, error) {
	s, err := f.Str(name)
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

// Flag reads a boolean sent as true/false or "true"/"false". Absent is false.
func (f Value) Flag(name string) (bool, error) {
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

// Amount reads a decimal amount in c, exactly: a JSON number or a numeric string.
func (f Value) Amount(name string, c money.Currency) (int64, bool, error) {
	s, err := f.Str(name)
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

// Text reads a string (or number) field, trimmed, of at most max characters.
func (f Value) Text(name string, max int) (string, error) {
	s, err := f.Str(name)
	if err != nil {
		return "", err
	}
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > max {
		return "", fault.Invalid(name, "%s must be at most %d characters", name, max)
	}
	return s, nil
}

// Card validates a card's number and expiry: a number that passes the Luhn check with a length its
// brand issues, a month 1..12, and a year of two or four digits.
func Card(number, month, year Value) (card.Number, card.Expiry, error) {
	var none card.Number
	pan, err := number.Digits("card_number")
	if err != nil {
		return none, card.Expiry{}, err
	}
	if pan == "" {
		return none, card.Expiry{}, fault.Invalid("card_number", "card_number is required")
	}
	n, err := card.ParseNumber(pan)
	if err == nil {
		err = card.Validate(n)
	}
	if err != nil {
		return none, card.Expiry{}, fault.Invalid("card_number", "card_number %s", err)
	}
	exp, err := Expiry(month, year)
	return n, exp, err
}

// Expiry validates card_expiry_month and card_expiry_year.
func Expiry(month, year Value) (card.Expiry, error) {
	mm, err := month.Digits("card_expiry_month")
	if err != nil {
		return card.Expiry{}, err
	}
	yy, err := year.Digits("card_expiry_year")
	if err != nil {
		return card.Expiry{}, err
	}
	switch {
	case mm == "":
		return card.Expiry{}, fault.Invalid("card_expiry_month", "card_expiry_month is required")
	case yy == "":
		return card.Expiry{}, fault.Invalid("card_expiry_year", "card_expiry_year is required")
	}
	exp, err := card.ParseExpiry(mm, yy)
	if err != nil {
		name := "card_expiry_year"
		if errors.Is(err, card.ErrMonth) {
			name = "card_expiry_month"
		}
		return card.Expiry{}, fault.Invalid(name, "%s %s", name, err)
	}
	return exp, nil
}

// CVV validates cvv2 for a card of brand b: 3 digits, 4 for American Express. A CVV sent as a JSON
// integer has lost its leading zeros ("012" became 12): they are restored.
func CVV(cvv Value, b card.Brand) (string, error) {
	code, err := cvv.Digits("cvv2")
	if err != nil {
		return "", err
	}
	if code == "" {
		return "", fault.Invalid("cvv2", "cvv2 is required")
	}
	if cvv.kind == 'n' {
		want := 3
		if b == card.Amex {
			want = 4
		}
		for len(code) < want {
			code = "0" + code
		}
	}
	if err := card.ValidateCVV(code, b); err != nil {
		return "", fault.Invalid("cvv2", "cvv2 %s", err)
	}
	return code, nil
}

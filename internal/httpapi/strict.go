package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
)

// The v1 payments API is strict where the gateway API is tolerant: a field must have its documented
// JSON type (an integer is a JSON integer, not 1.5 and not "100"), and a field the API does not know is
// a 400 that names it. DecodeStrict and UnmarshalStrict give both, with every error a *fault.Error
// naming the field by its path ("card.exp_month", "billing_details.address.country").

// DecodeStrict reads the request body (at most MaxBody bytes) into v, a pointer to a struct, strictly:
// see UnmarshalStrict. An empty body decodes as {}.
func DecodeStrict(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return BodyError(err)
	}
	return UnmarshalStrict(body, v, "")
}

// UnmarshalStrict decodes the JSON object data into v, a pointer to a struct. Object keys must match a
// field's json tag exactly (encoding/json alone would accept any letter case); any other key is a 400
// with the code unknown_field naming it, prefix first. A value of the wrong JSON type is a 400 naming
// its field, and so is text that no database would keep as sent (StorableJSON). A struct nested in v that should be strict too implements json.Unmarshaler by calling
// UnmarshalStrict with its own path as prefix ("card."); its errors pass through unchanged.
func UnmarshalStrict(data []byte, v any, prefix string) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 && prefix == "" {
		data = []byte("{}")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return strictError(err, prefix)
	}
	if keys == nil { // null: nothing to decode
		return nil
	}
	known := fieldNames(reflect.TypeOf(v))
	var unknown []string
	for k := range keys {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		name := prefix + unknown[0]
		if unknown[0] == "" {
			name = prefix + `""` // the empty key, named so that it can be seen
		}
		return &fault.Error{Status: http.StatusBadRequest, Code: "unknown_field", Field: name,
			Message: "Unknown field " + name + ": this API does not accept it."}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return strictError(err, prefix)
	}
	// Text a database would not keep as sent is refused, naming its field. A nested strict object has
	// checked its own fields, by their paths, while it was decoded above.
	names := slices.Sorted(maps.Keys(keys))
	for _, k := range names {
		if !StorableJSON(keys[k]) {
			return UnstorableText(prefix + k)
		}
	}
	return nil
}

// strictError maps a decoding error to a *fault.Error naming the field at fault.
func strictError(err error, prefix string) error {
	var f *fault.Error
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &f):
		return f
	case errors.As(err, &syn):
		return fault.BadRequest("invalid_json", "The request body is not valid JSON: %s (at byte %d).", syn.Error(), syn.Offset)
	case errors.As(err, &typ):
		name := strings.TrimSuffix(prefix+typ.Field, ".")
		if name == "" {
			return fault.BadRequest("invalid_json", "The request body must be a JSON object, not a JSON %s.", typ.Value)
		}
		return fault.Invalid(name, "%s must be %s, not a JSON %s.", name, strictKind(typ.Type), typ.Value)
	default:
		return fault.BadRequest("invalid_json", "The request body is not valid JSON: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// strictKind names the JSON type a Go type is decoded from.
func strictKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]bool

// fieldNames is the set of JSON names of the struct t points to.
func fieldNames(t reflect.Type) map[string]bool {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	s := t
	for s.Kind() == reflect.Pointer {
		s = s.Elem()
	}
	m := map[string]bool{}
	if s.Kind() == reflect.Struct {
		for i := range s.NumField() {
			f := s.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch name {
			case "-":
				continue
			case "":
				name = f.Name
			}
			m[name] = true
		}
	}
	fieldCache.Store(t, m)
	return m
}

// Texts reads the optional text fields of a strict body one after another and keeps the first fault:
// each is trimmed, and must be at most its maximum of characters of valid UTF-8 without control
// characters.
type Texts struct{ Err error }

// Read returns the trimmed text of the field name ("" when absent or once a fault was found).
func (t *Texts) Read(name string, v *string, max int) string {
	if t.Err != nil || v == nil {
		return ""
	}
	s := strings.TrimSpace(*v)
	if utf8.RuneCountInString(s) > max || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		t.Err = fault.Invalid(name, "%s must be at most %d characters of text", name, max)
		return ""
	}
	return s
}

// OneOf reads a field that a body may send under either of two names, name and alias (a billing
// address's postal_code and zip): it returns the name and value of the one sent, or name and nil when
// neither is. Both sent with the same value are that value; with different values, a 400 naming name.
func OneOf(name string, v *string, alias string, a *string) (string, *string, error) {
	switch {
	case v != nil && a != nil && *v != *a:
		return name, nil, fault.Invalid(name, "%s and %s name the same field and differ; send one", name, alias)
	case v == nil && a != nil:
		return alias, a, nil
	}
	return name, v, nil
}

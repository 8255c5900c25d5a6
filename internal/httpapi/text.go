package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
)

// Text a client sends is stored, and compared in queries, as sent; what a database cannot hold as sent
// is refused up front with a 400 naming where it was, never met later as a database error (a 500 on
// PostgreSQL) or stored differently on SQLite. Bodies are checked by their readers (StorableJSON);
// the path and query of an API request by StorableRequest.

// StorableJSON reports whether every string of the JSON text raw (one value, as encoding/json hands it
// to an Unmarshaler, or a whole body) decodes to text that both databases keep exactly as sent:
//
//   - valid UTF-8: encoding/json would replace invalid bytes with U+FFFD without a word, and PostgreSQL
//     refuses them where SQLite stores them;
//   - no NUL character (\u0000): PostgreSQL's text types cannot hold it;
//   - no \u escape of a lone UTF-16 surrogate, which encoding/json also turns into U+FFFD (RFC 8259
//     §8.2: such a string's behaviour is "unpredictable").
//
// raw is valid JSON (the decoder has read it), so every backslash is an escape inside a string.
func StorableJSON(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; a \\ is skipped whole
		if raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1:])
		i += 4
		switch {
		case r == 0, r >= 0xdc00 && r <= 0xdfff:
			return false
		case r >= 0xd800 && r <= 0xdbff:
			// A high surrogate must be followed by the escape of a low one.
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			if lo := hex4(raw[i+3:]); lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

// UnstorableText is the fault of a field whose text no database would keep as sent (StorableJSON).
func UnstorableText(name string) error {
	return fault.Invalid(name, "%s must be text in UTF-8 without NUL characters", name)
}

// StorableRequest wraps an API handler so that a request whose path or query string holds text no
// database keeps as sent (a NUL, invalid UTF-8) is a 400 before it runs: its path values become ids
// looked up in the database, its query parameters filters. A query parameter at fault is named; a
// path is named "path".
func StorableRequest(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Storable(r.URL.Path) {
			WriteError(w, r, UnstorableText("path"))
			return
		}
		if r.URL.RawQuery != "" { // most API requests have none: nothing to parse
			q := r.URL.Query()
			for _, k := range slices.Sorted(maps.Keys(q)) {
				if !Storable(k) {
					WriteError(w, r, fault.BadRequest("invalid_request", "The query string has a parameter name that is not text in UTF-8 without NUL characters."))
					return
				}
				for _, v := range q[k] {
					if !Storable(v) {
						WriteError(w, r, UnstorableText(k))
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Storable reports whether s is text that both databases keep, and compare, as sent: valid UTF-8
// without NUL.
func Storable(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

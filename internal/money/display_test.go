package money

import (
	"testing"

	"golang.org/x/text/language"
)

// TestDisplay pins what a person reads for an amount: CLDR's grouping, decimal mark and symbol for the
// locale, the symbol where the locale's currency pattern puts it, and the ISO 4217 minor unit's number
// of decimals. "\u00a0" is the no-break space CLDR puts in these patterns.
func TestDisplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor int64
		code  string
		tag   string
		want  string
	}{
		{123456, "USD", "en-US", "$1,234.56"},
		{123456, "CAD", "en-US", "CA$1,234.56"},
		{123456, "CAD", "en-CA", "$1,234.56"},
		{123456, "USD", "en-CA", "US$1,234.56"},
		{123456, "CAD", "fr-CA", "1\u00a0234,56\u00a0$"},
		{123456, "EUR", "de-DE", "1.234,56\u00a0€"},
		{123456, "BRL", "pt-BR", "R$\u00a01.234,56"},
		{1235, "JPY", "ja-JP", "￥1,235"},
		{1235, "JPY", "en-US", "¥1,235"},
		{1234567, "BHD", "en-US", "BHD\u00a01,234.567"},
		{5, "KWD", "de-DE", "0,005\u00a0KWD"},
		{0, "USD", "en-US", "$0.00"},
		{5, "USD", "en-US", "$0.05"},
		{-123456, "USD", "en-US", "-$1,234.56"},
		{-500, "EUR", "de-DE", "-5,00\u00a0€"},
		{-123456, "CAD", "fr-CA", "-1\u00a0234,56\u00a0$"},
		{MaxMinor, "CAD", "en-US", "CA$10,000,000,000,000.00"},
		{100, "XCG", "en-US", "XCG\u00a01.00"}, // newer than x/text's CLDR: the code stands for the symbol
		{123456, "USD", "tlh", "$1,234.56"},    // an unsupported locale reads as the default
	} {
		c, ok := Lookup(tc.code)
		if !ok {
			t.Fatalf("Lookup(%s) failed", tc.code)
		}
		if got := Display(tc.minor, c, language.Make(tc.tag)); got != tc.want {
			t.Errorf("Display(%d, %s, %s) = %q; want %q", tc.minor, tc.code, tc.tag, got, tc.want)
		}
	}
}

func TestParseLocale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"de-DE", "de-DE", true}, {"fr-ca", "fr-CA", true}, {"ja-JP", "ja-JP", true},
		{"de", "", false}, {"xx-YY", "", false}, {"en_US_bad!", "", false}, {"", "", false},
	} {
		got, ok := ParseLocale(tc.in)
		if ok != tc.ok || (ok && got.String() != tc.want) {
			t.Errorf("ParseLocale(%q) = %v, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for _, l := range Locales() {
		if _, ok := ParseLocale(l.Tag); !ok || l.Name == "" {
			t.Errorf("listed locale %+v does not parse or has no name", l)
		}
	}
	if got := Locales()[6]; got.Tag != "de-DE" || got.Name != "Deutsch (Deutschland)" {
		t.Errorf("Locales()[6] = %+v", got)
	}
}

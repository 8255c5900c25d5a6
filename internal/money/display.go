package money

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
	"golang.org/x/text/message"
	"golang.org/x/text/number"
)

// DefaultLocale is the locale amounts are shown in for a merchant who has not chosen one.
var DefaultLocale = language.AmericanEnglish

// locales are the locales a merchant may choose for amounts a person reads, each with where its CLDR
// standard currency pattern (currencyFormats/standard) puts the currency symbol. x/text carries CLDR's
// digits, grouping, decimal marks and currency symbols but not the currency patterns, so the one fact
// it lacks is recorded here, per supported locale, copied from CLDR.
var locales = []struct {
	tag    language.Tag
	suffix bool   // the symbol follows the number ("#,##0.00 ¤")
	space  string // what CLDR's pattern puts between number and symbol: "" or U+00A0
}{
	{language.MustParse("en-US"), false, ""},       // ¤#,##0.00
	{language.MustParse("en-CA"), false, ""},       // ¤#,##0.00
	{language.MustParse("en-GB"), false, ""},       // ¤#,##0.00
	{language.MustParse("en-AU"), false, ""},       // ¤#,##0.00
	{language.MustParse("fr-CA"), true, "\u00a0"},  // #,##0.00 ¤
	{language.MustParse("fr-FR"), true, "\u00a0"},  // #,##0.00 ¤
	{language.MustParse("de-DE"), true, "\u00a0"},  // #,##0.00 ¤
	{language.MustParse("es-ES"), true, "\u00a0"},  // #,##0.00 ¤
	{language.MustParse("es-MX"), false, ""},       // ¤#,##0.00
	{language.MustParse("it-IT"), true, "\u00a0"},  // #,##0.00 ¤
	{language.MustParse("nl-NL"), false, "\u00a0"}, // ¤ #,##0.00
	{language.MustParse("pt-BR"), false, "\u00a0"}, // ¤ #,##0.00
	{language.MustParse("ja-JP"), false, ""},       // ¤#,##0.00
}

// Locale is a locale a merchant may choose: its BCP 47 tag and its name in its own language.
type Locale struct {
	Tag  string // "fr-CA"
	Name string // "français (Canada)": language and region in the locale's own language, from CLDR
}

// Locales lists the supported locales in a stable order, with names people read.
func Locales() []Locale {
	out := make([]Locale, len(locales))
	for i, l := range locales {
		base, _ := l.tag.Base()
		region, _ := l.tag.Region()
		out[i] = Locale{Tag: l.tag.String(),
			Name: display.Languages(l.tag).Name(base) + " (" + display.Regions(l.tag).Name(region) + ")"}
	}
	return out
}

// ParseLocale returns the supported locale whose BCP 47 tag is s ("de-DE", in any letter case). It
// reports false for a malformed tag and for a well-formed one Kassa does not support.
func ParseLocale(s string) (language.Tag, bool) {
	t, err := language.Parse(s)
	if err != nil {
		return language.Und, false
	}
	for _, l := range locales {
		if l.tag == t {
			return t, true
		}
	}
	return language.Und, false
}

// Display writes minor units of c as a person in locale tag reads an amount: the digits, grouping,
// decimal mark and currency symbol from CLDR (through x/text), the symbol where the locale's CLDR
// currency pattern puts it, and exactly c.Digits decimals, the ISO 4217 minor unit (none for JPY,
// three for BHD). 123456 CAD reads "CA$1,234.56" in en-US and "1 234,56 $" in fr-CA; a negative amount
// carries the locale's minus sign before the whole ("-$5.00"). The result is for people only: API
// bodies and exports keep Format's plain decimal. A tag that is not supported reads as DefaultLocale.
func Display(minor int64, c Currency, tag language.Tag) string {
	place := locales[0]
	for _, l := range locales {
		if l.tag == tag {
			place = l
			break
		}
	}
	p := message.NewPrinter(place.tag)
	neg := minor < 0
	u := uint64(minor)
	if neg {
		u = -u // exact even for the most negative int64
	}
	var pow uint64 = 1
	for i := 0; i < c.Digits; i++ {
		pow *= 10
	}
	num := p.Sprint(number.Decimal(u / pow))
	if c.Digits > 0 {
		num += decimalMark(p) + p.Sprint(number.Decimal(u%pow, number.MinIntegerDigits(c.Digits), number.NoSeparator()))
	}
	sym := c.Code
	if unit, err := currency.ParseISO(c.Code); err == nil {
		sym = p.Sprint(currency.Symbol(unit))
	}
	var b strings.Builder
	if neg {
		b.WriteString(minusSign(p))
	}
	if place.suffix {
		b.WriteString(num)
		b.WriteString(spacing(place.space, sym, false))
		b.WriteString(sym)
	} else {
		b.WriteString(sym)
		b.WriteString(spacing(place.space, sym, true))
		b.WriteString(num)
	}
	return b.String()
}

// spacing is what stands between the symbol and the number: the pattern's own space, or, where the
// pattern has none and the symbol's side next to the digits is a letter ("BHD"), a no-break space, as
// CLDR's currencySpacing rule asks so that "BHD1,234.567" does not run together.
func spacing(pattern, sym string, before bool) string {
	if pattern != "" || sym == "" {
		return pattern
	}
	var r rune
	if before {
		r, _ = utf8.DecodeLastRuneInString(sym)
	} else {
		r, _ = utf8.DecodeRuneInString(sym)
	}
	if unicode.IsLetter(r) {
		return "\u00a0"
	}
	return ""
}

// decimalMark is the locale's decimal separator, as CLDR gives it: what stands between the digits of
// one half.
func decimalMark(p *message.Printer) string {
	return strings.TrimFunc(p.Sprint(number.Decimal(0.5, number.Scale(1))), unicode.IsDigit)
}

// minusSign is the locale's minus sign, with any bidirectional mark CLDR puts around it.
func minusSign(p *message.Printer) string {
	return strings.TrimRightFunc(p.Sprint(number.Decimal(-1)), unicode.IsDigit)
}

package money

import (
	"errors"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   string
		ok     bool
		digits int
	}{
		{"CAD", true, 2}, {"usd", true, 2}, {"JPY", true, 0}, {"KWD", true, 3}, {"CLF", true, 4},
		{"XAU", false, 0}, {"ABC", false, 0}, {"CA", false, 0}, {"CADX", false, 0}, {"", false, 0},
	} {
		c, ok := Lookup(tc.code)
		if ok != tc.ok || (ok && (c.Digits != tc.digits || c.Code != strings.ToUpper(tc.code))) {
			t.Errorf("Lookup(%q) = %+v, %v", tc.code, c, ok)
		}
	}
}

// The numeric codes ISO 8583's field 49 carries: the profile's examples, and one for every currency.
func TestNumeric(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]string{"CAD": "124", "USD": "840", "EUR": "978", "JPY": "392", "KWD": "414"} {
		if c, _ := Lookup(code); c.Numeric() != want {
			t.Errorf("%s.Numeric() = %q, want %q", code, c.Numeric(), want)
		}
	}
	for code := range iso4217 {
		n := Currency{Code: code}.Numeric()
		if len(n) != 3 || strings.Trim(n, "0123456789") != "" {
			t.Errorf("%s.Numeric() = %q, want three digits", code, n)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	cad, _ := Lookup("CAD")
	jpy, _ := Lookup("JPY")
	kwd, _ := Lookup("KWD")
	for _, tc := range []struct {
		name string
		in   string
		c    Currency
		want int64
		err  string
	}{
		{"whole", "11", cad, 1100, ""},
		{"two decimals", "59.99", cad, 5999, ""},
		{"one decimal", "0.5", cad, 50, ""},
		{"zero", "0", cad, 0, ""},
		{"negative zero", "-0.00", cad, 0, ""},
		{"trailing zeros", "10.500", cad, 1050, ""},
		{"leading zeros", "007.10", cad, 710, ""},
		{"yen", "500", jpy, 500, ""},
		{"yen with zero decimals", "500.0", jpy, 500, ""},
		{"dinar", "1.234", kwd, 1234, ""},
		{"too precise", "10.999", cad, 0, "has more decimals than CAD allows (2)"},
		{"yen decimals", "1.5", jpy, 0, "has more decimals than JPY allows (0)"},
		{"negative", "-1.00", cad, 0, ErrNegative.Error()},
		{"exponent", "1e2", cad, 0, ErrSyntax.Error()},
		{"plus", "+1", cad, 0, ErrSyntax.Error()},
		{"empty", "", cad, 0, ErrSyntax.Error()},
		{"dot only", ".", cad, 0, ErrSyntax.Error()},
		{"leading dot", ".5", cad, 0, ErrSyntax.Error()},
		{"trailing dot", "5.", cad, 0, ErrSyntax.Error()},
		{"two dots", "1.2.3", cad, 0, ErrSyntax.Error()},
		{"letters", "ten", cad, 0, ErrSyntax.Error()},
		{"space", " 1", cad, 0, ErrSyntax.Error()},
		{"max", "10000000000000.00", cad, MaxMinor, ""},
		{"above max", "10000000000000.01", cad, 0, ErrTooLarge.Error()},
		{"huge", "99999999999999999999999", cad, 0, ErrTooLarge.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in, tc.c)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Parse(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	cad, _ := Lookup("CAD")
	jpy, _ := Lookup("JPY")
	kwd, _ := Lookup("KWD")
	for _, tc := range []struct {
		minor int64
		c     Currency
		want  string
	}{
		{1100, cad, "11.00"}, {5, cad, "0.05"}, {50, cad, "0.50"}, {0, cad, "0.00"}, {-1999, cad, "-19.99"},
		{500, jpy, "500"}, {1005, kwd, "1.005"}, {1, kwd, "0.001"}, {MaxMinor, cad, "10000000000000.00"},
	} {
		if got := Format(tc.minor, tc.c); got != tc.want {
			t.Errorf("Format(%d, %s) = %q; want %q", tc.minor, tc.c.Code, got, tc.want)
		}
	}
}

// FuzzParse checks that every accepted string formats back to the same value, that parsing never
// panics, and that the result never exceeds MaxMinor.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"11", "59.99", "0.5", "-1", "10.999", "1e2", "007.10", "99999999999999999"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, digits int) {
		c := Currency{Code: "TST", Digits: ((digits % 5) + 5) % 5}
		v, err := Parse(s, c)
		if err != nil {
			if v != 0 {
				t.Fatalf("Parse(%q) returned %d with error %v", s, v, err)
			}
			if errors.Is(err, ErrNegative) && !strings.HasPrefix(s, "-") {
				t.Fatalf("Parse(%q): negative without a minus", s)
			}
			return
		}
		if v < 0 || v > MaxMinor {
			t.Fatalf("Parse(%q) = %d out of range", s, v)
		}
		back, err := Parse(Format(v, c), c)
		if err != nil || back != v {
			t.Fatalf("round trip of %q: %d -> %q -> %d, %v", s, v, Format(v, c), back, err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	cad, _ := Lookup("CAD")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("1234.56", cad); err != nil {
			b.Fatal(err)
		}
	}
}

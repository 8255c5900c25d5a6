package card_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
)

func TestBrandAndValidity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pan   string
		brand card.Brand
		ok    bool
	}{
		{cardtest.Visa, card.Visa, true},
		{cardtest.Visa2, card.Visa, true},
		{"4222222222222", card.Visa, true}, // 13 digits
		{cardtest.Mastercard, card.Mastercard, true},
		{"2223003122003222", card.Mastercard, true}, // 2-series
		{cardtest.Amex, card.Amex, true},
		{"371449635398431", card.Amex, true},
		{cardtest.Discover, card.Discover, true},
		{"6011000990139424", card.Discover, true},
		{"3566002020360505", card.JCB, true},
		{"36227206271667", card.Diners, true},
		{"6200000000000005", card.UnionPay, true},
		{"4242424242424241", card.Visa, false},     // Luhn
		{"37828224631000", card.Amex, false},       // 14 digits: Amex issues 15
		{"55555555555544", card.Mastercard, false}, // 14 digits
		{"424242424242424", card.Visa, false},      // 15 digits
		{"9999999999999995", card.Other, true},     // unknown range, Luhn ok
	} {
		n, err := card.ParseNumber(tc.pan)
		if err != nil {
			t.Fatalf("%s: %v", tc.pan, err)
		}
		if b := card.BrandOf(n); b != tc.brand {
			t.Errorf("%s: brand %s, want %s", tc.pan, b, tc.brand)
		}
		if err := card.Validate(n); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tc.pan, err, tc.ok)
		}
	}
}

func TestParseNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]error{
		"4242 4242 4242 4242":  nil,
		"4242-4242-4242-4242":  nil,
		"":                     card.ErrNumberLength,
		"42424242424":          card.ErrNumberLength,
		"42424242424242424242": card.ErrNumberLength,
		"4242x24242424242":     card.ErrNumberDigits,
		" 4242424242424242":    card.ErrNumberDigits,
		"4242424242424242 ":    card.ErrNumberDigits,
		"４２４２４２４２４２４２４２４２": card.ErrNumberDigits,
	} {
		if _, err := card.ParseNumber(in); !errors.Is(err, want) {
			t.Errorf("ParseNumber(%q) = %v, want %v", in, err, want)
		}
	}
}

// A Number shows at most the first six and last four digits, however it is printed.
func TestNumberNeverPrintsInFull(t *testing.T) {
	t.Parallel()
	n, _ := card.ParseNumber(cardtest.Visa)
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("charge", "card", n, "wrapped", struct{ N card.Number }{n})
	js, _ := json.Marshal(map[string]any{"card": n})
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", n), "%s": fmt.Sprintf("%s", n), "%q": fmt.Sprintf("%q", n), "%d": fmt.Sprintf("%d", n),
		"%+v": fmt.Sprintf("%+v", n), "%#v": fmt.Sprintf("%#v", n), "struct %+v": fmt.Sprintf("%+v", struct{ N card.Number }{n}),
		"error": fmt.Errorf("declined %v", n).Error(), "slog": logs.String(), "json": string(js),
	} {
		if strings.Contains(s, cardtest.Visa) {
			t.Errorf("%s prints the full number: %s", name, s)
		}
	}
	if n.Masked() != "424242******4242" || n.Last4() != "4242" || n.First6() != "424242" || n.Digits() != cardtest.Visa {
		t.Fatalf("Masked %q Last4 %q First6 %q", n.Masked(), n.Last4(), n.First6())
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m, y string
		want card.Expiry
		err  error
	}{
		{"8", "30", card.Expiry{Month: 8, Year: 2030}, nil},
		{"08", "2030", card.Expiry{Month: 8, Year: 2030}, nil},
		{"12", "00", card.Expiry{Month: 12, Year: 2000}, nil},
		{"0", "30", card.Expiry{}, card.ErrMonth},
		{"13", "30", card.Expiry{}, card.ErrMonth},
		{"008", "30", card.Expiry{}, card.ErrMonth},
		{"x", "30", card.Expiry{}, card.ErrMonth},
		{"8", "3", card.Expiry{}, card.ErrYear},
		{"8", "030", card.Expiry{}, card.ErrYear},
		{"8", "1999", card.Expiry{}, card.ErrYear},
		{"8", "20300", card.Expiry{}, card.ErrYear},
		{"8", "", card.Expiry{}, card.ErrYear},
	} {
		got, err := card.ParseExpiry(tc.m, tc.y)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("ParseExpiry(%q, %q) = %v, %v", tc.m, tc.y, got, err)
		}
	}
	e := card.Expiry{Month: 2, Year: 2028}
	if e.String() != "02/28" {
		t.Fatalf("String %q", e.String())
	}
	if e.Expired(time.Date(2028, 2, 29, 23, 59, 59, 0, time.UTC)) {
		t.Fatal("expired on its last day")
	}
	if !e.Expired(time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("valid after its month")
	}
}

func TestCVV(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cvv   string
		brand card.Brand
		err   error
	}{
		{"123", card.Visa, nil}, {"1234", card.Amex, nil}, {"12", card.Visa, card.ErrCVVLength},
		{"1234", card.Visa, card.ErrCVVLength}, {"123", card.Amex, card.ErrCVVAmex}, {"12a", card.Visa, card.ErrCVVDigits},
		{"", card.Visa, card.ErrCVVDigits},
	} {
		if err := card.ValidateCVV(tc.cvv, tc.brand); !errors.Is(err, tc.err) {
			t.Errorf("ValidateCVV(%q, %s) = %v, want %v", tc.cvv, tc.brand, err, tc.err)
		}
	}
}

func FuzzNumber(f *testing.F) {
	for _, p := range cardtest.All {
		f.Add(p)
	}
	f.Add("4242 4242-4242 4242")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := card.ParseNumber(s)
		if err != nil {
			return
		}
		d := n.Digits()
		if len(d) < 12 || len(d) > 19 {
			t.Fatalf("accepted %d digits", len(d))
		}
		card.Validate(n)
		card.BrandOf(n)
		if m := n.Masked(); strings.Contains(m, d) || len(m) != len(d) || m[len(m)-4:] != d[len(d)-4:] {
			t.Fatalf("Masked(%s) = %s", d, m)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		n, err := card.ParseNumber(cardtest.Visa)
		if err != nil || card.Validate(n) != nil || card.BrandOf(n) != card.Visa {
			b.Fatal(err)
		}
	}
}

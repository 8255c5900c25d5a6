package origin_test

import (
	"testing"

	"github.com/kassapay/kassa/internal/origin"
)

func TestOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://partner.example/logo.png?size=64#x": "https://partner.example",
		"HTTPS://Partner.EXAMPLE:8443/cb":            "https://partner.example:8443",
		"http://127.0.0.1:3000/callback":             "http://127.0.0.1:3000",
		"http://[::1]:8080/":                         "http://[::1]:8080",
		"https://[2001:DB8::1]/":                     "https://[2001:db8::1]",
		"https://user:pw@shop.example/":              "https://shop.example",
		"https://xn--bcher-kva.example":              "https://xn--bcher-kva.example",
		"https://localhost:0443":                     "https://localhost:443",
	} {
		if got, err := origin.Of(in); err != nil || got != want {
			t.Errorf("Of(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// Whatever net/url lets through in a host that is not a DNS name or an IP literal is refused: a
	// ";" would end the CSP directive it is put in, a space or a quote would add a source.
	for _, bad := range []string{
		"https://partner.example;script-src *",
		"https://partner.example;script-src",
		"https://partner.example%3Bscript-src",
		"https://partner.example'unsafe-inline'",
		`https://partner.example"`,
		"https://partner.example,https://evil.example",
		"https://partner example",
		"https://*.partner.example",
		"https://bücher.example",
		"https://-partner.example",
		"https://partner..example",
		"https://partner.example.",
		"https://partner.example:99999",
		"https://partner.example:",
		"https://[fe80::1%25eth0]/",
		"ftp://partner.example",
		"javascript:alert(1)",
		"//partner.example",
		"partner.example",
		"",
	} {
		if got, err := origin.Of(bad); err == nil {
			t.Errorf("Of(%q) = %q, want an error", bad, got)
		}
	}
}

package httpapi_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/kassapay/kassa/internal/httpapi"
)

// The client address: the peer, or behind trusted proxies the right-most X-Forwarded-For address
// that is not a trusted proxy.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies, err := httpapi.ParsePrefixes(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8")
	if err != nil || len(proxies) != 3 || proxies[1] != netip.MustParsePrefix("192.0.2.7/32") {
		t.Fatalf("ParsePrefixes: %v %v", proxies, err)
	}
	for _, c := range []struct {
		name, peer string
		forwarded  []string
		trusted    httpapi.Proxies
		want       string
	}{
		{"no proxy trusted: X-Forwarded-For is ignored", "10.1.1.1:5000", []string{"203.0.113.9"}, nil, "10.1.1.1"},
		{"an untrusted peer's X-Forwarded-For is ignored", "198.51.100.4:5000", []string{"203.0.113.9"}, proxies, "198.51.100.4"},
		{"a trusted proxy names the client", "10.1.1.1:5000", []string{"203.0.113.9"}, proxies, "203.0.113.9"},
		{"what the client forged is left of what the proxy wrote", "10.1.1.1:5000", []string{"1.2.3.4, 203.0.113.9"}, proxies, "203.0.113.9"},
		{"a chain of trusted proxies", "10.1.1.1:5000", []string{"203.0.113.9, 192.0.2.7", "10.2.2.2"}, proxies, "203.0.113.9"},
		{"several headers are one list", "10.1.1.1:5000", []string{"1.2.3.4", "203.0.113.9"}, proxies, "203.0.113.9"},
		{"only proxies: the left-most", "10.1.1.1:5000", []string{"10.3.3.3, 192.0.2.7"}, proxies, "10.3.3.3"},
		{"garbage ends the walk at the last good hop", "10.1.1.1:5000", []string{"203.0.113.9, junk, 10.2.2.2"}, proxies, "10.2.2.2"},
		{"no header: the proxy itself", "10.1.1.1:5000", nil, proxies, "10.1.1.1"},
		{"IPv6 behind an IPv6 proxy", "[fd00::1]:5000", []string{"2001:db8::5"}, proxies, "2001:db8::5"},
		{"an IPv4-mapped peer is its IPv4 address", "[::ffff:10.1.1.1]:5000", []string{"::ffff:203.0.113.9"}, proxies, "203.0.113.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.forwarded {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := c.trusted.ClientAddr(r); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if _, err := httpapi.ParsePrefixes("10.0.0.0/8,nonsense"); err == nil {
		t.Error("ParsePrefixes accepted nonsense")
	}
}

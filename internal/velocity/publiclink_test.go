package velocity_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// A public link's requests are limited per link and per client address, each a bucket of its quota
// per minute: the quota at once, then one more per share of the minute. An IPv6 client is one address
// per /64, which one host commonly holds whole; an IPv4 client is its address.
func TestPublicLinkLimits(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Now())
	l := newLimiter(t, storetest.SQLite(t), clk, nil)
	refused := func(err error) *fault.RateLimit {
		t.Helper()
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Status != 429 || fe.Limit == nil {
			t.Fatalf("%v, want a 429 with its limit", err)
		}
		return fe.Limit
	}
	a := netip.MustParseAddr("203.0.113.7")
	for i := range velocity.LinkPerMinute {
		if err := l.PublicLink("one", a); err != nil {
			t.Fatalf("request %d of a link: %v", i+1, err)
		}
	}
	wantLimit(t, refused(l.PublicLink("one", netip.MustParseAddr("198.51.100.9"))), "link", velocity.LinkPerMinute, time.Minute, time.Second)
	clk.Advance(time.Second) // one request of the link back
	if err := l.PublicLink("one", a); err != nil {
		t.Fatalf("the link a second later: %v", err)
	}
	if err := l.PublicLink("one", a); err == nil {
		t.Fatal("the link took two requests a second later")
	}

	// Two addresses of one /64 share their quota; another /64 has its own.
	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	for i := range velocity.AddressPerMinute {
		if err := l.PublicLink("link-"+string(rune('a'+i%20)), v6); err != nil {
			t.Fatalf("request %d of an address: %v", i+1, err)
		}
	}
	wantLimit(t, refused(l.PublicLink("fresh", netip.MustParseAddr("2001:db8:1:2:ffff::9"))), "link-address", velocity.AddressPerMinute,
		time.Minute, 500*time.Millisecond)
	if err := l.PublicLink("fresh", netip.MustParseAddr("2001:db8:1:3::1")); err != nil {
		t.Fatalf("an address of another /64: %v", err)
	}
}

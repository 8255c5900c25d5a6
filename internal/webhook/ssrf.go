package webhook

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// notPublic lists the address ranges that no delivery may reach beside the ones netip classifies
// (loopback, private, link-local, multicast, unspecified): "the address is resolved at delivery and
// refused when it is loopback, private, link-local or otherwise not public" (issue 18, point 5).
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: an IPv4 address behind a translator
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (Teredo among them)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: an IPv4 address inside
	netip.MustParsePrefix("fec0::/10"),       // site-local, deprecated
}

// Public reports whether ip is an address on the public internet: a global unicast address outside
// the private (RFC 1918, fc00::/7), shared (100.64/10) and special-purpose ranges. An IPv4 address
// written as IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it is.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// refusedError is a connection not made because its address is not public.
type refusedError struct{ ip netip.Addr }

func (e *refusedError) Error() string { return fmt.Sprintf("address %s is not public", e.ip.Unmap()) }

// refuseNotPublic is a net.Dialer's Control: it runs after the name was resolved, with the address
// about to be dialed, so a DNS answer that changes between a check and the connection cannot slip a
// private address through (the check is on the address connected to, not on an earlier lookup).
func refuseNotPublic(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	if !Public(ip) {
		return &refusedError{ip}
	}
	return nil
}

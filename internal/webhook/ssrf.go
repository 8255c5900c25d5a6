package webhook

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// notPublic lists the address ranges that no delivery may reach beside the ones netip classifies
// (loopback, private, link-local, multicast, unspecified): "the address is resolved at delivery and
// refused when it is loopback, private, link-local or otherwise not public".
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	// IPv6 forms that carry an IPv4 address where the guard does not follow it, refused whatever
	// address they carry: no receiver on the public internet needs them.
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated): some stacks send ::a.b.c.d to a.b.c.d itself
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64: the operator's own translator, the IPv4 address where it chooses
	// IETF protocol assignments, Teredo (2001::/32) among them: a Teredo address carries its server's
	// IPv4 address in bits 32–63 and its client's, every bit inverted, in the last 32, and is reached
	// through a relay and the client's NAT over UDP; refused whatever it carries.
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("100::/64"),      // discard
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("fec0::/10"),     // site-local, deprecated
}

// embedsIPv4 are the IPv6 prefixes whose addresses lead to the IPv4 address written inside them, at a
// fixed place (from the byte at): such an address is as public as the IPv4 address it carries, and is
// judged as that address. A network with IPv6 only reaches receivers with IPv4 only through a NAT64
// translator at 64:ff9b::/96 (DNS64 answers with those addresses), so refusing them all would leave
// such a node no receiver without IPv6.
var embedsIPv4 = []struct {
	prefix netip.Prefix
	at     int
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12}, // NAT64, the well-known prefix: the last 32 bits
	{netip.MustParsePrefix("2002::/16"), 2},     // 6to4: bits 16–47, the router the packets are tunnelled to
}

// Public reports whether ip is an address on the public internet: a global unicast address outside
// the private (RFC 1918, fc00::/7), shared (100.64/10) and special-purpose ranges. An IPv6 address
// that carries an IPv4 address is judged as that IPv4 address when it leads there — IPv4-mapped
// (::ffff:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) — and refused whatever it carries in
// the other forms (IPv4-compatible ::/96, IPv4-translated, local-use NAT64, Teredo). A zone is
// ignored: fe80::1%eth0 is judged as fe80::1, and a zone cannot take an address out of a range.
func Public(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	for _, e := range embedsIPv4 {
		if e.prefix.Contains(ip) {
			b := ip.As16()
			ip = netip.AddrFrom4([4]byte(b[e.at : e.at+4]))
			break
		}
	}
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

// refusedError is a connection not made because its address is not public. Its text names the
// address: it is for the operator's log, never for the merchant's delivery log (describe).
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

package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the reverse proxies trusted to name the client in X-Forwarded-For; none by default.
type Proxies []netip.Prefix

// ClientAddr is the address of the client of r, for what is kept per client (sign-in throttling).
// The client is the peer, unless the peer is one of the trusted proxies: then it is the right-most
// X-Forwarded-For address that is not itself a trusted proxy. Entries further left were written by
// whoever sent the request to the first trusted proxy, and anyone can write anything there; with no
// trusted proxy (the default), X-Forwarded-For is never read. It is resolved where it is needed,
// not for every request: the payment API has no use for it.
func (p Proxies) ClientAddr(r *http.Request) netip.Addr {
	return resolveClientAddr(peerAddr(r), r.Header.Values("X-Forwarded-For"), p)
}

// peerAddr is the address of the connection's other end (the zero Addr when RemoteAddr is not an
// address, as in a test request built by hand).
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap().WithZone("")
}

// resolveClientAddr walks the X-Forwarded-For chain from the right while the hop it stands on is a
// trusted proxy. Each header value may list several addresses; several headers count as one list in
// order (RFC 9110 §5.3). An entry that is not an address ends the walk at the last hop known good.
func resolveClientAddr(peer netip.Addr, forwarded []string, trusted []netip.Prefix) netip.Addr {
	var chain []string
	for _, v := range forwarded {
		chain = append(chain, strings.Split(v, ",")...)
	}
	addr := peer
	for i := len(chain) - 1; i >= 0 && isTrusted(addr, trusted); i-- {
		next, err := netip.ParseAddr(strings.TrimSpace(chain[i]))
		if err != nil {
			break
		}
		addr = next.Unmap().WithZone("")
	}
	return addr
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParsePrefixes parses a comma-separated list of CIDR prefixes ("10.0.0.0/8,2001:db8::/32"); a bare
// address stands for itself alone.
func ParsePrefixes(list string) (Proxies, error) {
	var out Proxies
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, err
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

type clientAddrKey struct{}

// ClientAddrs resolves each request's client address once, for what is kept per client (sign-in
// throttling), and puts it in the request's context for ClientAddr. The client is the peer, unless
// the peer is one of the trusted proxies: then it is the right-most X-Forwarded-For address that is
// not itself a trusted proxy. Entries further left were written by whoever sent the request to the
// first trusted proxy, and anyone can write anything there; with no trusted proxy (the default),
// X-Forwarded-For is never read.
func ClientAddrs(trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := resolveClientAddr(peerAddr(r), r.Header.Values("X-Forwarded-For"), trusted)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, addr)))
	})
}

// ClientAddr is the address of the client of r, as ClientAddrs resolved it; without ClientAddrs in
// front, the peer's address.
func ClientAddr(r *http.Request) netip.Addr {
	if a, ok := r.Context().Value(clientAddrKey{}).(netip.Addr); ok {
		return a
	}
	return peerAddr(r)
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
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
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

// Package origin reduces a URL to its origin (RFC 6454 §4: scheme, host and port), rebuilt from the
// parsed parts and checked, never copied from the text as given, so that it can go into a header such
// as Content-Security-Policy. net/url accepts characters in a host that a CSP source list does not
// (";", "'", "\"", "," …): copied as given, "https://a.example;script-src *" would end one directive
// and start another.
package origin

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ErrNotOrigin is returned for a URL without an origin Kassa can use: not absolute http or https, or a
// host that is neither a DNS name nor an IP literal, or a port that is not a number.
var ErrNotOrigin = errors.New("origin: not an http or https URL with a DNS name or IP address as host")

// Of returns the origin of raw, an absolute http or https URL, as scheme "://" host [":" port]: the
// scheme and a DNS name in lower case, an IPv6 literal in brackets, the port as a decimal number.
func Of(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", ErrNotOrigin
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", ErrNotOrigin
	}
	host, ok := hostOf(u.Hostname())
	if !ok {
		return "", ErrNotOrigin
	}
	out := scheme + "://" + host
	if p := u.Port(); p != "" {
		// RFC 3986 §3.2.3: port = *DIGIT; a TCP port is at most 65535.
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return "", ErrNotOrigin
		}
		out += ":" + strconv.FormatUint(n, 10)
	} else if strings.HasSuffix(u.Host, ":") {
		return "", ErrNotOrigin
	}
	return out, nil
}

// hostOf checks host as an IP literal or a DNS name and returns it as it is written in an origin.
func hostOf(host string) (string, bool) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", false // a zone names an interface of the browser's machine, never a web origin
		}
		if ip.Is4() {
			return ip.String(), true
		}
		return "[" + ip.String() + "]", true
	}
	host = strings.ToLower(host)
	// RFC 1123 §2.1 host names: labels of letters, digits and hyphens, 1 to 63 characters, not
	// starting or ending with a hyphen; at most 253 characters in all. A name in another script is
	// given in its ASCII (punycode) form.
	if host == "" || len(host) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	return host, true
}

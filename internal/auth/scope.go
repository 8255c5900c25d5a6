package auth

import (
	"fmt"
	"strings"
)

// Scopes is a set of OAuth scopes, as bits so that a token carries it in two bytes.
type Scopes uint16

// The scopes Kassa knows. Ecom is what the transaction, customer and plan services require.
const (
	ScopeEcom Scopes = 1 << iota
	ScopeInvoice
)

// scopeNames lists every scope in the order String writes them.
var scopeNames = []struct {
	s    Scopes
	name string
}{{ScopeEcom, "ecom"}, {ScopeInvoice, "invoice"}}

// DefaultScopes are granted to a new client: "ecom invoice", as the spec's example token carries.
const DefaultScopes = ScopeEcom | ScopeInvoice

// ParseScopes reads a space-separated scope list (RFC 6749 §3.3). Unknown names are an error.
func ParseScopes(s string) (Scopes, error) {
	var out Scopes
	for _, f := range strings.Fields(s) {
		found := false
		for _, n := range scopeNames {
			if n.name == f {
				out |= n.s
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown scope %q", f)
		}
	}
	return out, nil
}

// String is the space-separated list that token responses carry in "scope".
func (s Scopes) String() string {
	var b strings.Builder
	for _, n := range scopeNames {
		if s&n.s != 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(n.name)
		}
	}
	return b.String()
}

// Has reports whether s includes every scope of want.
func (s Scopes) Has(want Scopes) bool { return s&want == want }

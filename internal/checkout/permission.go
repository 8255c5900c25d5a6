package checkout

import (
	"fmt"
	"strings"
)

// Permissions is a set of API-key permissions.
type Permissions uint16

// The permissions of the v1 API: hosted-payment-page-api.md, "Endpoints" rule 2, names the first six;
// events and webhook endpoints have their own, and so do refunds (refunds:read and refunds:write).
const (
	APIKeysRead Permissions = 1 << iota
	APIKeysWrite
	PaymentIntentsRead
	PaymentIntentsWrite
	PaymentMethodsRead
	PaymentMethodsWrite
	EventsRead
	WebhooksRead
	WebhooksWrite
	RefundsRead
	RefundsWrite
)

// HostedPagePermissions are the six that hosted-payment-page-api.md requires of the key that creates a
// session ("Endpoints", rule 2).
const HostedPagePermissions = APIKeysRead | APIKeysWrite | PaymentIntentsRead | PaymentIntentsWrite | PaymentMethodsRead | PaymentMethodsWrite

// AllPermissions is every permission.
const AllPermissions = HostedPagePermissions | RefundsRead | RefundsWrite | EventsRead | WebhooksRead | WebhooksWrite

var permissionNames = []struct {
	p    Permissions
	name string
}{
	{APIKeysRead, "api_keys:read"}, {APIKeysWrite, "api_keys:write"},
	{PaymentIntentsRead, "payment_intents:read"}, {PaymentIntentsWrite, "payment_intents:write"},
	{PaymentMethodsRead, "payment_methods:read"}, {PaymentMethodsWrite, "payment_methods:write"},
	{RefundsRead, "refunds:read"}, {RefundsWrite, "refunds:write"},
	{EventsRead, "events:read"}, {WebhooksRead, "webhooks:read"}, {WebhooksWrite, "webhooks:write"},
}

// ParsePermissions reads permission names. An unknown name is an error that names it; an empty list is
// no permission.
func ParsePermissions(names []string) (Permissions, error) {
	var out Permissions
	for _, n := range names {
		n = strings.TrimSpace(n)
		found := false
		for _, pn := range permissionNames {
			if pn.name == n {
				out |= pn.p
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown permission %q (known: %s)", n, strings.Join(AllPermissions.Names(), ", "))
		}
	}
	return out, nil
}

// Names lists the permissions of p in a fixed order.
func (p Permissions) Names() []string {
	out := []string{}
	for _, pn := range permissionNames {
		if p&pn.p != 0 {
			out = append(out, pn.name)
		}
	}
	return out
}

// String is the space-separated list stored in the database.
func (p Permissions) String() string { return strings.Join(p.Names(), " ") }

// Has reports whether p includes every permission of want.
func (p Permissions) Has(want Permissions) bool { return p&want == want }

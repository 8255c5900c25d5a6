package httpapi

import "context"

// Principal is who an authenticated request acts as: the account whose data it reaches and the
// credential that authenticated it. What is kept per caller — idempotency records, rate limits —
// is kept per principal, so that two credentials of one account never share it, and one credential
// acting for two accounts (a partner's) keeps each account's apart.
type Principal struct {
	// Account is the account the request acts for, "acct_" + a merchant or partner id.
	Account string
	// Credential names the credential: "client:<client id>" for a bearer token (the client it was
	// issued to, whatever the grant), "key:<key id>" for a v1 API key.
	Credential string
}

// String is the principal as one key: account and credential, separated by a space (which neither
// contains).
func (p Principal) String() string { return p.Account + " " + p.Credential }

type principalKey struct{}

// WithPrincipal returns ctx carrying p. The authentication of each API face (the bearer-token check,
// the v1 API-key check) calls it once the credential is known good.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of the request of ctx, and false outside an authenticated
// request.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

package checkout

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/velocity"
)

// The headers of the v1 API (hosted-payment-page-api.md, "Authentication"): "Header payments-api-key
// carries the secret API key; header payments-account carries the account identifier."
const (
	HeaderAPIKey  = "payments-api-key"
	HeaderAccount = "payments-account"
)

// Caller is who sends a v1 request: the API key, and the account the request acts for.
type Caller struct {
	Key APIKey
	// Account is the account the request acts for, "acct_" + a merchant or partner id.
	Account string
	// Merchant is the merchant of Account; nil when a partner's key acts for the partner's own account,
	// which holds no payments.
	Merchant *merchant.Merchant
}

// Who is the caller as the payment-intent operations take it. A partner acting for itself has no
// merchant: payment intents and methods belong to merchants.
func (c Caller) Who(requestID string) (Who, error) {
	if c.Merchant == nil {
		return Who{}, fault.New(http.StatusForbidden, "merchant_account_required",
			"%s is a partner's account, which holds no payments: send in %s a merchant account that has authorized this partner.",
			c.Account, HeaderAccount)
	}
	return Who{Merchant: *c.Merchant, ClientID: c.Key.ID, RequestID: requestID, Principal: c.Principal()}, nil
}

// Principal is who the request acts as (httpapi.Principal): the account it acts for, and the key.
func (c Caller) Principal() httpapi.Principal { return KeyPrincipal(c.Account, c.Key.ID) }

// KeyPrincipal is the principal of the API key keyID acting for account ("acct_…").
func KeyPrincipal(account, keyID string) httpapi.Principal {
	return httpapi.Principal{Account: account, Credential: "key:" + keyID}
}

type callerKey struct{}

// CallerFrom returns the caller that Protect put in ctx.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Protect authenticates a v1 request and authorizes it for need, then runs h with the Caller and its
// Principal in the context, behind the request rate of its principal (velocity.Limiter.Requests) and,
// for POSTs, the idempotency layer (whose records are the key's own for the account it acts for):
//
//   - no payments-api-key, or one that is not a live key: 401;
//   - a key without the permission the endpoint needs: 403 naming it;
//   - no payments-account, or one that is not acct_ and 10 lowercase hex digits: 400 naming the header;
//   - an account the key may not act for: 403. "A key may act for its own account, and a partner's key
//     for a merchant account that has authorized that partner" (wire-contract.md, "Hosted payment page"),
//     for the payments the merchant approved it for: the ecom scope (payments_not_approved otherwise);
//   - a path or query string with text no database keeps as sent: 400 (httpapi.StorableRequest).
func (s *Service) Protect(need Permissions, h http.Handler) http.Handler {
	idem := s.velocity.Requests(callerLimits, httpapi.StorableRequest(s.idem.Middleware(h)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		secret := r.Header.Get(HeaderAPIKey)
		if secret == "" {
			unauthorized(w, r, "The "+HeaderAPIKey+" header is required: send your secret API key in it.")
			return
		}
		key, ok, err := s.keys.lookup(ctx, secret)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if !ok {
			unauthorized(w, r, "The API key in "+HeaderAPIKey+" is not a valid key; it may have been deleted.")
			return
		}
		if !key.Permissions.Has(need) {
			httpapi.WriteError(w, r, fault.New(http.StatusForbidden, "insufficient_permissions",
				"This API key lacks the permission %s, which %s needs.", strings.Join((need&^key.Permissions).Names(), ", "), r.Pattern))
			return
		}
		caller, err := s.resolve(ctx, key, r.Header.Get(HeaderAccount))
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		ctx = httpapi.WithPrincipal(context.WithValue(ctx, callerKey{}, caller), caller.Principal())
		idem.ServeHTTP(w, r.WithContext(ctx))
	})
}

// callerLimits are the velocity limits of the merchant a request acts for; a partner acting for its
// own account, which has no merchant, has the defaults.
func callerLimits(r *http.Request) velocity.Limits {
	if m := CallerFrom(r.Context()).Merchant; m != nil {
		return m.Velocity
	}
	return velocity.Limits{}
}

// resolve decides whether key may act for account.
func (s *Service) resolve(ctx context.Context, key APIKey, account string) (Caller, error) {
	if account == "" {
		return Caller{}, fault.Invalid(HeaderAccount, "The %s header is required: the account (acct_…) the request acts for.", HeaderAccount)
	}
	id, ok := strings.CutPrefix(account, accountPrefix)
	if !ok || !validAccountID(id) {
		// A value that names no account at all is the client's mistake, not a refusal: 400, so that
		// "acct_" alone never reaches the comparisons below (a merchant's key has no partner id, a
		// partner's key no merchant id).
		return Caller{}, fault.Invalid(HeaderAccount, "The %s header is malformed: an account id is acct_ and 10 lowercase hex digits.", HeaderAccount)
	}
	forbidden := fault.New(http.StatusForbidden, "account_forbidden", "This API key may not act for account %s.", account)
	c := Caller{Key: key, Account: account}
	switch {
	case id == key.MerchantID:
	case id == key.PartnerID:
		return c, nil // the partner's own account
	case key.PartnerID != "":
		scopes, err := s.keys.partnerScopes(ctx, key.PartnerID, id)
		if err != nil {
			return Caller{}, err
		}
		if scopes == 0 {
			return Caller{}, forbidden
		}
		// A partner's access to a merchant, on every surface, is limited to the scopes that merchant
		// approved, and the v1 payments API needs ecom. Every v1 route a partner may use for a
		// merchant is a payments route (API keys are managed only by their own account).
		if !scopes.Has(auth.ScopeEcom) {
			return Caller{}, fault.New(http.StatusForbidden, "payments_not_approved",
				"Account %s has not approved payments for this partner: it approved only %q, and the payments API needs %q.",
				account, scopes.String(), auth.ScopeEcom.String())
		}
	default:
		return Caller{}, forbidden
	}
	m, err := s.merchants.Get(ctx, id)
	if errors.Is(err, merchant.ErrNotFound) {
		return Caller{}, forbidden
	}
	if err != nil {
		return Caller{}, err
	}
	c.Merchant = &m
	return c, nil
}

// validAccountID reports whether id has the shape of a merchant or partner id: 10 lowercase hex digits.
func validAccountID(id string) bool {
	if len(id) != 10 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !(id[i] >= '0' && id[i] <= '9' || id[i] >= 'a' && id[i] <= 'f') {
			return false
		}
	}
	return true
}

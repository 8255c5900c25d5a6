package auth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// SecondStep says what a sign-in of user id needs after its password (user.NextStep): every sign-in
// of Kassa's, the pages' and the password grant's, asks it here.
func (s *Service) SecondStep(ctx context.Context, id string) (user.Step, error) {
	var step user.Step
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		step, err = user.NextStep(ctx, q, id)
		return err
	})
	return step, err
}

// passwordGrant is the resource owner password credentials grant (RFC 6749 §4.3) that gateway-api.md
// names in "Authentication" rule 7: the merchant's dashboard e-mail as username and its password,
// with the merchant's own client authenticated. It issues a refresh token under a grant of its own,
// so that the tokens can be refreshed and revoked together.
//
// RFC 6749 §4.3.2: the server "MUST protect the endpoint against brute force attacks (e.g., using
// rate-limitation or generating alerts)": attempts are throttled per client (signInClient).
func (s *Service) passwordGrant(ctx context.Context, r *http.Request, p url.Values) (*tokenResponse, error) {
	c, err := s.authenticateClient(ctx, r, p)
	if err != nil {
		return nil, err
	}
	if c.merchantID == "" {
		return nil, unauthorizedClient("A partner's client gets tokens through the authorization_code grant.")
	}
	username, pw := p.Get("username"), p.Get("password")
	if username == "" || pw == "" {
		return nil, invalidRequest("The username and password parameters are required.")
	}
	scopes := c.scopes
	if sc := p.Get("scope"); sc != "" {
		asked, err := ParseScopes(sc)
		if err != nil || asked == 0 || !c.scopes.Has(asked) {
			return nil, &oauthError{status: http.StatusBadRequest, Code: "invalid_scope",
				Description: "The requested scope is unknown or exceeds what the client may ask for."}
		}
		scopes = asked
	}
	acct, err := s.signInClient(ctx, c, username, pw)
	var throttled *ThrottledError
	switch {
	case errors.As(err, &throttled) && throttled.Busy:
		return nil, &oauthError{status: http.StatusTooManyRequests, Code: "invalid_grant",
			Description: "Too many sign-ins are being checked; try again in a moment.", retryAfter: throttled.Until.Sub(s.now())}
	case errors.As(err, &throttled):
		return nil, &oauthError{status: http.StatusTooManyRequests, Code: "invalid_grant",
			Description: "Too many failed sign-ins; try again later.", retryAfter: throttled.Until.Sub(s.now())}
	case errors.Is(err, ErrBadCredentials):
		return nil, invalidGrant("The e-mail or password is wrong.")
	case err != nil:
		return nil, err
	}
	// A password is one factor. A user who has a second one, or whose merchant requires one, gets
	// tokens only where the second factor is asked: the authorization-code flow's sign-in. The
	// refusal comes after the password was checked, so that it tells nothing to whoever does not
	// know it.
	if step, err := s.SecondStep(ctx, acct.UserID); err != nil {
		return nil, err
	} else if step != user.StepNone {
		return nil, invalidGrant("This user signs in with two-factor authentication, which the password grant cannot ask for: " +
			"get tokens through the authorization-code flow (/oauth/authorize), whose sign-in asks for the code, " +
			"or, for the merchant's own integration, with this client's credentials (grant_type=client_credentials).")
	}
	now := s.now()
	var resp *tokenResponse
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		id, err := insertGrant(ctx, tx, c.idString(), c.merchantID, "", scopes, now)
		if err != nil {
			return err
		}
		resp, err = s.issueForGrant(ctx, tx, grant{id: id, clientID: c.idString(), merchantID: c.merchantID, scopes: scopes}, c, now)
		return err
	})
	if err == nil {
		s.noteUse(ctx, c)
	}
	return resp, err
}

// Refusal is how a sign-in page answers an attempt that SignIn refused: the status and the sentence
// to show; for a throttled attempt it sets h's Retry-After. refused is false when err is nil or a
// failure of Kassa's rather than a refusal.
func Refusal(h http.Header, err error, now time.Time) (status int, msg string, refused bool) {
	var throttled *ThrottledError
	switch {
	case errors.As(err, &throttled):
		wait := throttled.Until.Sub(now)
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(wait), 10))
		if throttled.Busy {
			return http.StatusTooManyRequests, "Kassa is busy checking other sign-ins. Try again in a moment.", true
		}
		return http.StatusTooManyRequests, "Too many failed sign-ins. Try again in " + minutes(wait) + ".", true
	case errors.Is(err, ErrBadCredentials):
		return http.StatusUnauthorized, "The e-mail or password is wrong.", true
	}
	return 0, "", false
}

// minutes says how long d is, rounded up to whole minutes.
func minutes(d time.Duration) string {
	m := int((d + time.Minute - 1) / time.Minute)
	if m <= 1 {
		return "a minute"
	}
	return strconv.Itoa(m) + " minutes"
}

// RetryAfterSeconds rounds a wait up to whole seconds, for the Retry-After header.
func RetryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

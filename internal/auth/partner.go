package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/origin"
	"github.com/kassapay/kassa/internal/store"
)

// Token validity of a partner's access tokens: 20 minutes unless the operator sets another
// (gateway-api.md, "Authentication" rule 5 gives both 12 hours and 20 minutes; partners get the short
// one, and a refresh token for the rest).
const (
	DefaultPartnerValidity = 20 * time.Minute
	maxPartnerName         = 200
	maxCallbackURIs        = 10
)

// ErrUnknownPartner is returned for a partner id that does not exist.
var ErrUnknownPartner = errors.New("auth: unknown partner")

// Partner is a business whose app acts for the merchants who approve it.
type Partner struct {
	ID           string // 10 lowercase hex characters
	Name         string
	ImageURL     string
	CallbackURIs []string
	CreatedAt    time.Time
}

// AccountID is the partner's account id in the payments API: "acct_" + the partner id.
func (p Partner) AccountID() string { return "acct_" + p.ID }

// NewPartner is what the operator records for a partner: "a business name, a square image URL and a
// callback URI out of band" (gateway-api.md, "Authentication" rule 3), and how long its access tokens
// last (0: DefaultPartnerValidity).
type NewPartner struct {
	Name          string
	ImageURL      string
	CallbackURIs  []string
	TokenValidity time.Duration
}

// PartnerCredentials is a new partner with its client-credential pair. The secret is shown once.
type PartnerCredentials struct {
	PartnerID    string `json:"partner_id"`
	AccountID    string `json:"account_id"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// CreatePartner stores a partner and its client, inside the caller's transaction.
func CreatePartner(ctx context.Context, tx store.Querier, n NewPartner, now time.Time) (PartnerCredentials, error) {
	name := strings.TrimSpace(n.Name)
	if name == "" || utf8.RuneCountInString(name) > maxPartnerName {
		return PartnerCredentials{}, fault.Invalid("name", "name must be 1 to %d characters", maxPartnerName)
	}
	// The image's origin goes into the consent page's Content-Security-Policy (img-src): its host
	// must be a DNS name or an IP address (package origin), nothing a header could be bent with.
	if o, err := origin.Of(n.ImageURL); err != nil || !strings.HasPrefix(o, "https://") || len(n.ImageURL) > 2000 {
		return PartnerCredentials{}, fault.Invalid("image_url", "image_url must be an https URL whose host is a DNS name or an IP address")
	}
	if len(n.CallbackURIs) == 0 || len(n.CallbackURIs) > maxCallbackURIs {
		return PartnerCredentials{}, fault.Invalid("callback_uri", "give 1 to %d callback URIs", maxCallbackURIs)
	}
	for _, c := range n.CallbackURIs {
		if err := ValidateCallbackURI(c); err != nil {
			return PartnerCredentials{}, fault.Invalid("callback_uri", "callback URI %q %s", c, err)
		}
	}
	validity := n.TokenValidity
	if validity == 0 {
		validity = DefaultPartnerValidity
	}
	if validity < MinValidity || validity > MaxValidity || validity%time.Second != 0 {
		return PartnerCredentials{}, fault.Invalid("token_validity", "token validity must be whole seconds between %v and %v", MinValidity, MaxValidity)
	}
	id, err := merchant.NewAccountID(ctx, tx)
	if err != nil {
		return PartnerCredentials{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO partners (id, name, image_url, callback_uris, created_at) VALUES ($1, $2, $3, $4, $5)`,
		id, name, n.ImageURL, strings.Join(n.CallbackURIs, "\n"), now.UnixMilli()); err != nil {
		return PartnerCredentials{}, err
	}
	clientID, secret, err := insertClient(ctx, tx, "", id, validity, now)
	if err != nil {
		return PartnerCredentials{}, err
	}
	return PartnerCredentials{PartnerID: id, AccountID: Partner{ID: id}.AccountID(), ClientID: clientID, ClientSecret: secret}, nil
}

// ValidateCallbackURI checks a redirect URI as RFC 6749 §3.1.2 asks: absolute, without a fragment;
// and, since the code travels in it, https, or http only to a loopback address (RFC 8252 §7.3). Its
// host must be a DNS name or an IP address: the callback's origin goes into the consent page's
// Content-Security-Policy (form-action).
func ValidateCallbackURI(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || len(s) > 2000:
		return errors.New("must be an absolute URL")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return errors.New("must not have a fragment")
	case u.Scheme != "https" && (u.Scheme != "http" || !isLoopback(u.Hostname())):
		return errors.New("must be https (http only for localhost)")
	}
	if _, err := origin.Of(s); err != nil {
		return errors.New("must have a DNS name or an IP address as host")
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// GetPartner reads a partner.
func GetPartner(ctx context.Context, q store.Querier, id string) (Partner, error) {
	p := Partner{ID: id}
	var uris string
	var created int64
	err := q.QueryRowContext(ctx, `SELECT name, image_url, callback_uris, created_at FROM partners WHERE id = $1`, id).
		Scan(&p.Name, &p.ImageURL, &uris, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Partner{}, ErrUnknownPartner
	}
	if err != nil {
		return Partner{}, fmt.Errorf("auth: read partner: %w", err)
	}
	p.CallbackURIs, p.CreatedAt = strings.Split(uris, "\n"), time.UnixMilli(created)
	return p, nil
}

// PartnerScopes returns the scopes the merchant has approved for the partner: the union of the scopes
// of the partner's grants for the merchant that are not revoked, and whose client is not revoked
// either; none when the merchant has not authorized the partner. A partner's access to a merchant,
// on every surface, is limited to the scopes that merchant approved: a bearer token carries its
// grant's scopes, and the payments API's partner keys ask this.
func PartnerScopes(ctx context.Context, q store.Querier, partnerID, merchantID string) (Scopes, error) {
	rows, err := q.QueryContext(ctx, `SELECT g.scopes FROM oauth_grants g JOIN oauth_clients c ON c.client_id = g.client_id
		WHERE g.partner_id = $1 AND g.merchant_id = $2 AND g.revoked_at IS NULL AND c.revoked_at IS NULL`, partnerID, merchantID)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var all Scopes
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return 0, err
		}
		s, err := ParseScopes(text)
		if err != nil {
			return 0, fmt.Errorf("auth: scopes of a grant: %w", err)
		}
		all |= s
	}
	return all, rows.Err()
}

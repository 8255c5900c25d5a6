// Package merchant keeps the merchants of a Kassa installation: the accounts whose money moves
// through the gateway and whose data every other package scopes by merchant id.
package merchant

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/origin"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/velocity"

	"golang.org/x/text/language"
)

// Merchant is one merchant account.
type Merchant struct {
	ID              string // 10 lowercase hex characters
	Name            string
	Email           string
	DefaultCurrency string // ISO 4217, upper case
	CreatedAt       time.Time
	Settings
}

// Settings are what a merchant's payments are checked against.
type Settings struct {
	// Currencies the merchant accepts (default CAD and USD, and always its default currency).
	Currencies []string
	// MaxAmountCents is the largest amount of one transaction, in hundredths of a major currency
	// unit (default 99999999: 999999.99).
	MaxAmountCents int64
	// SimulatorProfile is the built-in simulator's decision rule for this merchant: "standard"
	// (test cards decide) or "payfirma" (the original sandbox's odd/even amount rule).
	SimulatorProfile string
	// Timezone is the IANA time zone whose calendar subscriptions bill by, and whose days invoices'
	// due dates and reminders are (default UTC).
	Timezone string
	// Locale is the BCP 47 tag of the locale amounts are shown in to people, on the dashboard, hosted
	// pages, invoices and receipts: one of money.Locales (default en-US).
	Locale string
	// AllowedOrigins are the origins whose pages may embed the merchant's hosted payment page; none
	// means the default (see FrameAncestors).
	AllowedOrigins []string
	// Velocity are the merchant's limits against card testing, as stored: a zero field is the default.
	Velocity velocity.Limits
}

// DefaultFrameAncestors is who may embed a hosted payment page when the merchant names no origins:
// any https origin, and http on localhost and 127.0.0.1 for development.
const DefaultFrameAncestors = "https: http://localhost:* http://127.0.0.1:*"

// FrameAncestors is the frame-ancestors source list of the merchant's hosted payment page. Each
// origin is rebuilt from its parsed scheme, host and port (package origin), never copied into the
// header as stored; one that is not an origin is left out, and when none is left no page may embed
// the hosted page ('none'), rather than falling back to the wider default.
func (s Settings) FrameAncestors() string {
	if len(s.AllowedOrigins) == 0 {
		return DefaultFrameAncestors
	}
	var out []string
	for _, o := range s.AllowedOrigins {
		if clean, err := ParseOrigin(o); err == nil {
			out = append(out, clean)
		}
	}
	if len(out) == 0 {
		return "'none'"
	}
	return strings.Join(out, " ")
}

// MayEmbed reports whether a page of origin (scheme://host[:port]) may embed the merchant's hosted
// payment page.
func (s Settings) MayEmbed(origin string) bool {
	if len(s.AllowedOrigins) > 0 {
		return slices.Contains(s.AllowedOrigins, origin)
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return false
	}
	return u.Scheme == "https" || (u.Scheme == "http" && (u.Hostname() == "localhost" || u.Hostname() == "127.0.0.1"))
}

// ParseOrigin checks that s is an origin, scheme://host[:port] with scheme http or https and a DNS
// name or IP address as host, and returns it in canonical form, rebuilt from its parts (package
// origin).
func ParseOrigin(s string) (string, error) {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err == nil && u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery {
		if o, err := origin.Of(s); err == nil {
			return o, nil
		}
	}
	return "", fmt.Errorf("%q is not an origin such as https://shop.example", s)
}

// Location is the merchant's time zone.
func (s Settings) Location() *time.Location {
	if loc, err := time.LoadLocation(s.Timezone); err == nil {
		return loc
	}
	return time.UTC
}

// Language is the merchant's locale, for money.Display; money.DefaultLocale when the stored tag is
// not one money supports.
func (s Settings) Language() language.Tag {
	if t, ok := money.ParseLocale(s.Locale); ok {
		return t
	}
	return money.DefaultLocale
}

// Accepts reports whether the merchant accepts currency code (upper case).
func (s Settings) Accepts(code string) bool {
	for _, c := range s.Currencies {
		if c == code {
			return true
		}
	}
	return false
}

// WithinMax reports whether minor units of c are at most the merchant's maximum amount.
func (s Settings) WithinMax(minor int64, c money.Currency) bool {
	// minor / 10^digits <= max / 100  <=>  minor * 100 <= max * 10^digits; both sides stay below
	// 2^63 for amounts up to money.MaxMinor and maxima up to MaxOfMaxAmount.
	scaled := s.MaxAmountCents
	for range c.Digits {
		scaled *= 10
	}
	return minor*100 <= scaled
}

// MaxAmount is the maximum as a decimal string, e.g. "999999.99".
func (s Settings) MaxAmount() string {
	return money.Format(s.MaxAmountCents, money.Currency{Digits: 2})
}

// AccountID is the merchant's account id in the payments API: "acct_" + the merchant id.
func (m Merchant) AccountID() string { return "acct_" + m.ID }

// New describes a merchant to create. Its e-mail is the merchant's contact; the staff who sign in to
// the dashboard are package user's (its first owner has the merchant's e-mail and id).
type New struct {
	Name     string
	Email    string
	Currency string // default currency; "" means CAD
}

// Simulator profiles.
const (
	ProfileStandard = "standard"
	ProfilePayfirma = "payfirma"
)

// MaxOfMaxAmount bounds the maximum amount a merchant may be given: 10^10 major units.
const MaxOfMaxAmount = 1_000_000_000_000

// Field limits.
const (
	maxName  = 200
	maxEmail = 254 // RFC 5321 §4.5.3.1.3 path limit
)

// ErrNotFound is returned for an unknown merchant id.
var ErrNotFound = errors.New("merchant: not found")

// Create validates n and stores the merchant in the caller's transaction. Validation failures are
// *fault.Error values naming the field.
func Create(ctx context.Context, tx store.Querier, n New, now time.Time) (Merchant, error) {
	m := Merchant{Name: strings.TrimSpace(n.Name), Email: strings.TrimSpace(n.Email), CreatedAt: now}
	if m.Name == "" || utf8.RuneCountInString(m.Name) > maxName {
		return Merchant{}, fault.Invalid("name", "name must be 1 to %d characters", maxName)
	}
	if err := ValidateEmail(m.Email); err != nil {
		return Merchant{}, fault.Invalid("email", "email %s", err)
	}
	cur := n.Currency
	if cur == "" {
		cur = "CAD"
	}
	c, ok := money.Lookup(cur)
	if !ok {
		return Merchant{}, fault.Invalid("currency", "currency %q is not an ISO 4217 currency code", n.Currency)
	}
	m.DefaultCurrency = c.Code
	var taken int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM merchants WHERE email_key = $1`, EmailKey(m.Email)).Scan(&taken); err != nil {
		return Merchant{}, err
	}
	if taken > 0 {
		return Merchant{}, fault.Conflict("email_taken", "a merchant with email %s already exists", m.Email)
	}
	id, err := NewAccountID(ctx, tx)
	if err != nil {
		return Merchant{}, err
	}
	m.ID = id
	m.Settings = Settings{Currencies: []string{"CAD", "USD"}, MaxAmountCents: 99999999, SimulatorProfile: ProfileStandard, Timezone: "UTC",
		Locale: money.DefaultLocale.String()}
	if !m.Accepts(m.DefaultCurrency) {
		m.Currencies = append([]string{m.DefaultCurrency}, m.Currencies...)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at,
		currencies, max_amount_cents, simulator_profile)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		m.ID, m.Name, m.Email, EmailKey(m.Email), m.DefaultCurrency, now.UnixMilli(),
		strings.Join(m.Currencies, " "), m.MaxAmountCents, m.SimulatorProfile)
	if store.IsUniqueViolation(err) {
		return Merchant{}, fault.Conflict("email_taken", "a merchant with email %s already exists", m.Email)
	}
	if err != nil {
		return Merchant{}, err
	}
	return m, nil
}

// Get reads a merchant by id.
func Get(ctx context.Context, q store.Querier, id string) (Merchant, error) {
	m := Merchant{ID: id}
	var created int64
	var currencies, origins string
	v := &m.Velocity
	err := q.QueryRowContext(ctx, `SELECT name, email, default_currency, created_at,
		currencies, max_amount_cents, simulator_profile, timezone, locale, allowed_origins, velocity_card_declines,
		velocity_credential_declines, velocity_intent_failures, velocity_sessions, velocity_request_rate FROM merchants WHERE id = $1`, id).
		Scan(&m.Name, &m.Email, &m.DefaultCurrency, &created, &currencies, &m.MaxAmountCents, &m.SimulatorProfile, &m.Timezone, &m.Locale, &origins,
			&v.CardDeclines, &v.CredentialDeclines, &v.IntentFailures, &v.Sessions, &v.RequestRate)
	if errors.Is(err, sql.ErrNoRows) {
		return Merchant{}, ErrNotFound
	}
	if err != nil {
		return Merchant{}, err
	}
	m.CreatedAt = time.UnixMilli(created)
	m.Currencies = strings.Fields(currencies)
	m.AllowedOrigins = strings.Fields(origins)
	return m, nil
}

// Summary is what the operator's list shows of a merchant.
type Summary struct {
	ID, Name, Email, DefaultCurrency string
	CreatedAt                        time.Time
}

// List returns every merchant, oldest first (kassa merchant list).
func List(ctx context.Context, q store.Querier) ([]Summary, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, name, email, default_currency, created_at FROM merchants ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var m Summary
		var created int64
		if err := rows.Scan(&m.ID, &m.Name, &m.Email, &m.DefaultCurrency, &created); err != nil {
			return nil, err
		}
		m.CreatedAt = time.UnixMilli(created).UTC()
		out = append(out, m)
	}
	return out, rows.Err()
}

// Update changes the settings that are set (non-nil) and returns the merchant. A currency list
// always keeps the default currency.
type Update struct {
	Currencies       []string
	MaxAmount        *string // decimal, e.g. "5000.00"
	SimulatorProfile *string
	Timezone         *string  // IANA name, e.g. America/Toronto
	Locale           *string  // BCP 47 tag of one of money.Locales, e.g. fr-CA
	AllowedOrigins   []string // origins that may embed the hosted payment page; an empty non-nil list restores the default
	// Velocity changes the limits whose field is not zero: to a number from 1 to velocity.MaxLimit, or
	// back to the default with velocity.UseDefault.
	Velocity velocity.Limits
}

// ApplyUpdate validates u and stores it in the caller's transaction.
func ApplyUpdate(ctx context.Context, tx store.Querier, id string, u Update) (Merchant, error) {
	m, err := Get(ctx, tx, id)
	if err != nil {
		return Merchant{}, err
	}
	if u.Currencies != nil {
		list := []string{m.DefaultCurrency}
		for _, code := range u.Currencies {
			c, ok := money.Lookup(strings.TrimSpace(code))
			if !ok {
				return Merchant{}, fault.Invalid("currencies", "currency %q is not an ISO 4217 currency code", code)
			}
			if !slices.Contains(list, c.Code) {
				list = append(list, c.Code)
			}
		}
		m.Currencies = list
	}
	if u.MaxAmount != nil {
		v, err := money.Parse(*u.MaxAmount, money.Currency{Code: "max", Digits: 2})
		if err != nil || v <= 0 || v > MaxOfMaxAmount {
			return Merchant{}, fault.Invalid("max_amount", "max_amount must be a positive decimal with at most two decimals, up to 10000000000.00")
		}
		m.MaxAmountCents = v
	}
	if u.SimulatorProfile != nil {
		if p := *u.SimulatorProfile; p != ProfileStandard && p != ProfilePayfirma {
			return Merchant{}, fault.Invalid("simulator_profile", "simulator_profile must be %s or %s", ProfileStandard, ProfilePayfirma)
		}
		m.SimulatorProfile = *u.SimulatorProfile
	}
	if u.Timezone != nil {
		if _, err := time.LoadLocation(*u.Timezone); err != nil || *u.Timezone == "" || *u.Timezone == "Local" {
			return Merchant{}, fault.Invalid("timezone", "timezone must be an IANA time zone name such as America/Toronto")
		}
		m.Timezone = *u.Timezone
	}
	if u.Locale != nil {
		t, ok := money.ParseLocale(*u.Locale)
		if !ok {
			return Merchant{}, fault.Invalid("locale", "locale must be one of the supported locales, such as en-CA or fr-CA")
		}
		m.Locale = t.String()
	}
	if u.AllowedOrigins != nil {
		m.AllowedOrigins = nil
		for _, o := range u.AllowedOrigins {
			origin, err := ParseOrigin(o)
			if err != nil {
				return Merchant{}, fault.Invalid("allowed_origins", "%s", err)
			}
			if !slices.Contains(m.AllowedOrigins, origin) {
				m.AllowedOrigins = append(m.AllowedOrigins, origin)
			}
		}
	}
	if m.Velocity, err = m.Velocity.Apply(u.Velocity); err != nil {
		return Merchant{}, err
	}
	v := m.Velocity
	_, err = tx.ExecContext(ctx, `UPDATE merchants SET currencies = $2, max_amount_cents = $3, simulator_profile = $4, timezone = $5,
		allowed_origins = $6, velocity_card_declines = $7, velocity_credential_declines = $8, velocity_intent_failures = $9,
		velocity_sessions = $10, velocity_request_rate = $11, locale = $12 WHERE id = $1`, id, strings.Join(m.Currencies, " "), m.MaxAmountCents,
		m.SimulatorProfile, m.Timezone, strings.Join(m.AllowedOrigins, " "), v.CardDeclines, v.CredentialDeclines, v.IntentFailures,
		v.Sessions, v.RequestRate, m.Locale)
	return m, err
}

// Count returns the number of merchants.
func Count(ctx context.Context, q store.Querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM merchants`).Scan(&n)
	return n, err
}

// ValidateEmail accepts a bare address (no display name) of at most 254 characters, and says what is
// wrong otherwise, as the end of a sentence that begins with the field's name.
func ValidateEmail(s string) error {
	if s == "" {
		return errors.New("is required")
	}
	if len(s) > maxEmail {
		return errors.New("must be at most 254 characters")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") {
		return errors.New("must be an e-mail address such as name@example.com")
	}
	return nil
}

// EmailKey is the form in which e-mail addresses are compared and kept unique: without regard to case.
func EmailKey(email string) string { return strings.ToLower(email) }

// NewAccountID returns 10 lowercase hex characters that are neither a merchant's nor a partner's id:
// the two share the payments API's account namespace ("acct_" + id). 40 random bits collide rarely,
// but possibly over many accounts, so a few ids are tried.
func NewAccountID(ctx context.Context, q store.Querier) (string, error) {
	var id string
	for range 5 {
		var b [5]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
		var taken int
		if err := q.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM merchants WHERE id = $1) + (SELECT COUNT(*) FROM partners WHERE id = $1)`,
			id).Scan(&taken); err != nil {
			return "", err
		}
		if taken == 0 {
			break
		}
	}
	return id, nil
}

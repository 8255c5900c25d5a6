package webhook

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// The endpoint store: /v1/webhook-endpoints creates, lists, gets, updates and deletes endpoints, each
// with url, enabled_events (types, or *), description and disabled; the dashboard and the operator's
// CLI do the same, each through the methods of Endpoints, so that the three faces keep one set of
// rules.

// Limits of an endpoint.
const (
	// MaxEndpoints is how many endpoints a merchant may have.
	MaxEndpoints = 16
	// MaxURLLength bounds an endpoint's URL, in bytes.
	MaxURLLength = 2048
	// MaxDescription bounds an endpoint's description, in characters.
	MaxDescription = 500
	// RotationOverlap is how long a rotated-out secret keeps signing: "rotating it keeps the old one
	// signing beside the new for 24 hours".
	RotationOverlap = 24 * time.Hour
)

// AllEvents is the enabled_events of an endpoint subscribed to every type, now and to come.
const AllEvents = "*"

// EndpointsConfig configures Endpoints.
type EndpointsConfig struct {
	DB      *store.DB
	Keyring *envelope.Keyring // seals the signing secrets
	Now     func() time.Time  // default time.Now
	// AllowPrivate is the server's `--webhooks-allow-private`: delivery to addresses that are not
	// public is allowed, for development and tests, and so are http:// URLs.
	AllowPrivate bool
}

// Endpoints keeps the merchants' webhook endpoints and their signing secrets.
type Endpoints struct {
	db           *store.DB
	ring         *envelope.Keyring
	now          func() time.Time
	allowPrivate bool
}

// NewEndpoints returns the store.
func NewEndpoints(cfg EndpointsConfig) *Endpoints {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Endpoints{db: cfg.DB, ring: cfg.Keyring, now: cfg.Now, allowPrivate: cfg.AllowPrivate}
}

// Endpoint is one of a merchant's webhook endpoints.
type Endpoint struct {
	ID            int64  // the row's id
	EndpointID    string // we_…
	MerchantID    string
	URL           string
	Description   string
	EnabledEvents []string // event types, or ["*"]
	Disabled      bool
	// DisabledReason is "" when the merchant disabled the endpoint, and why when Kassa did (an answer
	// 410, or five days of failures).
	DisabledReason string
	FailingSince   time.Time // zero unless deliveries have failed since the last success
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// WireEndpoint is an endpoint as the v1 API and the CLI show it. Secret is there only in the answer
// to its creation.
type WireEndpoint struct {
	ID             string   `json:"id"`
	Object         string   `json:"object"`
	URL            string   `json:"url"`
	EnabledEvents  []string `json:"enabled_events"`
	Description    string   `json:"description"`
	Disabled       bool     `json:"disabled"`
	DisabledReason string   `json:"disabled_reason"`
	Created        int64    `json:"created"`
	Secret         string   `json:"secret,omitempty"`
}

// Wire is the endpoint as the v1 API shows it, without its secret.
func (e Endpoint) Wire() WireEndpoint {
	return WireEndpoint{ID: e.EndpointID, Object: "webhook_endpoint", URL: e.URL, EnabledEvents: e.EnabledEvents,
		Description: e.Description, Disabled: e.Disabled, DisabledReason: e.DisabledReason, Created: e.CreatedAt.Unix()}
}

// EndpointBody is what creates or changes an endpoint: the v1 API's JSON body, the dashboard's form and
// the CLI's flags all come to this. A nil field is one not sent: an update leaves it as it is.
type EndpointBody struct {
	URL           *string   `json:"url"`
	EnabledEvents *[]string `json:"enabled_events"`
	Description   *string   `json:"description"`
	Disabled      *bool     `json:"disabled"`
}

// ParseEndpointBody reads a JSON body strictly (an unknown field, or one of the wrong type, is a 400
// naming it); its values are checked by Create and Update.
func ParseEndpointBody(body []byte) (EndpointBody, error) {
	var b EndpointBody
	err := httpapi.UnmarshalStrict(body, &b, "")
	return b, err
}

// fields are an endpoint's checked values.
type fields struct {
	url, description, events string
}

// check validates the fields b sends over the endpoint's current ones (those of a new endpoint: none),
// each bad one a 400 naming it.
func (s *Endpoints) check(b EndpointBody, cur fields, creating bool) (fields, error) {
	f := cur
	switch {
	case b.URL != nil:
		u, err := s.checkURL(*b.URL)
		if err != nil {
			return f, err
		}
		f.url = u
	case creating:
		return f, fault.Invalid("url", "url is required: the https URL that receives the events")
	}
	switch {
	case b.EnabledEvents != nil:
		ev, err := checkEvents(*b.EnabledEvents)
		if err != nil {
			return f, err
		}
		f.events = ev
	case creating:
		return f, fault.Invalid("enabled_events", `enabled_events is required: a list of event types, or ["*"] for every one`)
	}
	if b.Description != nil {
		t := httpapi.Texts{}
		f.description = t.Read("description", b.Description, MaxDescription)
		if t.Err != nil {
			return f, t.Err
		}
	}
	return f, nil
}

// checkURL checks an endpoint's URL: absolute https, without credentials, at most MaxURLLength bytes;
// http too when the server allows private delivery (development and tests). Whether its address is
// public is decided at each delivery, by the address dialed.
func (s *Endpoints) checkURL(raw string) (string, error) {
	invalid := func(why string) error { return fault.Invalid("url", "url %s", why) }
	if raw == "" {
		return "", invalid("is required: the https URL that receives the events")
	}
	if len(raw) > MaxURLLength {
		return "", invalid(fmt.Sprintf("must be at most %d characters", MaxURLLength))
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", invalid("must not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", invalid("must be an absolute URL, such as https://shop.example/webhooks")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && s.allowPrivate:
	case u.Scheme == "http":
		return "", invalid("must use https: events are sent only over TLS")
	default:
		return "", invalid("must be an https URL")
	}
	if u.User != nil {
		return "", invalid("must not contain a user name or password: authenticate deliveries by their signature")
	}
	if u.Hostname() == "" {
		return "", invalid("must name a host")
	}
	return raw, nil
}

// checkEvents checks enabled_events: event types (event.Types), or "*" alone. The types are kept in
// the order of event.Types, each once.
func checkEvents(types []string) (string, error) {
	if len(types) == 0 {
		return "", fault.Invalid("enabled_events", `enabled_events must list at least one event type, or ["*"] for every one`)
	}
	if slices.Contains(types, AllEvents) {
		if len(types) > 1 {
			return "", fault.Invalid("enabled_events", `enabled_events is either ["*"], every event type, or a list of types; not both`)
		}
		return AllEvents, nil
	}
	for _, t := range types {
		if !event.Known(t) {
			return "", fault.Invalid("enabled_events", "enabled_events: %q is not an event type; the types are %s", clip(t), strings.Join(event.Types, ", "))
		}
	}
	var out []string
	for _, t := range event.Types {
		if slices.Contains(types, t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, " "), nil
}

// clip shortens text a client sent for a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Actor is who changes an endpoint, for the audit log: the API key's id, "" for the dashboard (whose
// user the context names, audit.WithActor) and the operator's CLI.
type Actor struct {
	ClientID  string
	RequestID string
}

// record writes the audit record of a change to one of the merchant's endpoints in tx.
func record(ctx context.Context, tx *store.Tx, by Actor, merchantID, op, endpointID, detail string, at time.Time) error {
	return audit.Write(ctx, tx, audit.Record{MerchantID: merchantID, ClientID: by.ClientID, Operation: op,
		Resource: "webhook_endpoint/" + endpointID, Outcome: audit.Done, Detail: detail, RequestID: by.RequestID, At: at})
}

// lockMerchant takes the merchant's row lock for the rest of tx (not a key column, so that it does
// not wait on the merchant's payments), so that two creations cannot both see room for one more
// endpoint. An unknown merchant is a 404.
func lockMerchant(ctx context.Context, tx *store.Tx, merchantID string) error {
	r, err := tx.ExecContext(ctx, `UPDATE merchants SET created_at = created_at WHERE id = $1`, merchantID)
	if err != nil {
		return err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fault.NotFound("No merchant %s.", clip(merchantID))
	}
	return nil
}

// Create makes an endpoint of the merchant with a new signing secret, which it returns: "shown on
// creation". A merchant has at most MaxEndpoints.
func (s *Endpoints) Create(ctx context.Context, merchantID string, b EndpointBody, by Actor) (Endpoint, string, error) {
	f, err := s.check(b, fields{}, true)
	if err != nil {
		return Endpoint{}, "", err
	}
	now := time.UnixMilli(s.now().UnixMilli())
	e := Endpoint{EndpointID: "we_" + rand.Text()[:24], MerchantID: merchantID, URL: f.url, Description: f.description,
		EnabledEvents: strings.Fields(f.events), CreatedAt: now, UpdatedAt: now}
	if b.Disabled != nil {
		e.Disabled = *b.Disabled
	}
	secret := NewSecret()
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		if err := lockMerchant(ctx, tx, merchantID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = $1`, merchantID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return fault.Conflict("too_many_endpoints", "This account has %d webhook endpoints, the most it may have: delete one to add another.", n)
		}
		// It is sent the events from its creation on: its cursors start at its merchant's head (ledger.go).
		columns, heads := heads(tx.Dialect(), "$2")
		err := tx.QueryRowContext(ctx, `INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, description, enabled_events,
			disabled, secret, created_at, updated_at, `+strings.Join(columns, ", ")+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, `+
			strings.Join(heads, ", ")+`) RETURNING id`,
			e.EndpointID, merchantID, e.URL, e.Description, f.events, e.Disabled, sealSecret(s.ring, e.EndpointID, secret),
			now.UnixMilli()).Scan(&e.ID)
		if err != nil {
			return err
		}
		return record(ctx, tx, by, merchantID, "webhook_endpoint.create", e.EndpointID, e.URL, now)
	})
	if err != nil {
		return Endpoint{}, "", err
	}
	return e, secret, nil
}

// endpointColumns are the columns scanEndpoint reads, in order.
const endpointColumns = `id, endpoint_id, merchant_id, url, description, enabled_events, disabled, disabled_reason,
	failing_since, created_at, updated_at`

func scanEndpoint(row interface{ Scan(...any) error }) (Endpoint, error) {
	var e Endpoint
	var events string
	var failing sql.NullInt64
	var created, updated int64
	err := row.Scan(&e.ID, &e.EndpointID, &e.MerchantID, &e.URL, &e.Description, &events, &e.Disabled, &e.DisabledReason,
		&failing, &created, &updated)
	e.EnabledEvents = strings.Fields(events)
	if failing.Valid {
		e.FailingSince = time.UnixMilli(failing.Int64)
	}
	e.CreatedAt, e.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return e, err
}

// notFound is the answer about an endpoint the merchant does not have, its own or another's alike.
func notFound(id string) error { return fault.NotFound("No webhook endpoint %s.", clip(id)) }

// getEndpoint reads one of the merchant's endpoints.
func getEndpoint(ctx context.Context, q store.Querier, merchantID, id string) (Endpoint, error) {
	e, err := scanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE merchant_id = $1 AND endpoint_id = $2`, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, notFound(id)
	}
	return e, err
}

// Get returns one of the merchant's endpoints; another merchant's is not found.
func (s *Endpoints) Get(ctx context.Context, merchantID, id string) (Endpoint, error) {
	var e Endpoint
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		e, err = getEndpoint(ctx, q, merchantID, id)
		return err
	})
	return e, err
}

// List returns the merchant's endpoints, newest first: all of them, as there are at most MaxEndpoints.
func (s *Endpoints) List(ctx context.Context, merchantID string) ([]Endpoint, error) {
	var out []Endpoint
	err := s.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE merchant_id = $1 ORDER BY id DESC`, merchantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEndpoint(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

// lockEndpoint takes the row lock of one of the merchant's endpoints for the rest of tx, then reads it.
func lockEndpoint(ctx context.Context, tx *store.Tx, merchantID, id string, now time.Time) (Endpoint, error) {
	r, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET updated_at = $3 WHERE merchant_id = $1 AND endpoint_id = $2`,
		merchantID, id, now.UnixMilli())
	if err != nil {
		return Endpoint{}, err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return Endpoint{}, notFound(id)
	}
	return getEndpoint(ctx, tx, merchantID, id)
}

// Update changes the fields b sends of one of the merchant's endpoints. Enabling a disabled endpoint
// clears why Kassa disabled it and the failures it counted, so that it starts afresh; disabling it
// stops new deliveries to it.
func (s *Endpoints) Update(ctx context.Context, merchantID, id string, b EndpointBody, by Actor) (Endpoint, error) {
	var e Endpoint
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		var err error
		if e, err = lockEndpoint(ctx, tx, merchantID, id, now); err != nil {
			return err
		}
		f, err := s.check(b, fields{url: e.URL, description: e.Description, events: strings.Join(e.EnabledEvents, " ")}, false)
		if err != nil {
			return err
		}
		e.URL, e.Description, e.EnabledEvents, e.UpdatedAt = f.url, f.description, strings.Fields(f.events), now
		var detail []string
		enabled := b.Disabled != nil && !*b.Disabled && e.Disabled
		if b.Disabled != nil && *b.Disabled != e.Disabled {
			e.Disabled = *b.Disabled
			e.DisabledReason, e.FailingSince = "", time.Time{}
			detail = append(detail, map[bool]string{true: "disabled", false: "enabled"}[e.Disabled])
		}
		var failing any
		if !e.FailingSince.IsZero() {
			failing = e.FailingSince.UnixMilli()
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET url = $2, description = $3, enabled_events = $4, disabled = $5,
			disabled_reason = $6, failing_since = $7 WHERE id = $1`,
			e.ID, e.URL, e.Description, f.events, e.Disabled, e.DisabledReason, failing); err != nil {
			return err
		}
		if enabled {
			// Nothing was sent to it while it was disabled: its cursors move to its merchant's head
			// (ledger.go), as no event recorded meanwhile was queued for it.
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET `+headSQL(tx.Dialect(), "$2")+` WHERE id = $1 AND merchant_id = $2`,
				e.ID, merchantID); err != nil {
				return err
			}
		}
		return record(ctx, tx, by, merchantID, "webhook_endpoint.update", e.EndpointID, strings.Join(append(detail, e.URL), " "), now)
	})
	return e, err
}

// Delete deletes one of the merchant's endpoints, and with it its deliveries and their attempts.
func (s *Endpoints) Delete(ctx context.Context, merchantID, id string, by Actor) (Endpoint, error) {
	var e Endpoint
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		var err error
		if e, err = lockEndpoint(ctx, tx, merchantID, id, now); err != nil {
			return err
		}
		// Its deliveries go with it, their attempts and the events queued for it: deleted here, as on
		// PostgreSQL none has a foreign key to what it belongs to (migrations 00047, 00049, 00051).
		for _, stmt := range []string{
			`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE endpoint_id = $1)`,
			`DELETE FROM webhook_deliveries WHERE endpoint_id = $1`,
			`DELETE FROM webhook_queue WHERE endpoint_id = $1`,
		} {
			if _, err := tx.ExecContext(ctx, stmt, e.ID); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, e.ID); err != nil {
			return err
		}
		return record(ctx, tx, by, merchantID, "webhook_endpoint.delete", e.EndpointID, e.URL, now)
	})
	return e, err
}

// Secret returns the current signing secret of one of the merchant's endpoints: "shown on creation
// and by a /secret action".
func (s *Endpoints) Secret(ctx context.Context, merchantID, id string) (string, error) {
	var sealed []byte
	err := s.db.Read(ctx, func(q store.Querier) error {
		err := q.QueryRowContext(ctx, `SELECT secret FROM webhook_endpoints WHERE merchant_id = $1 AND endpoint_id = $2`,
			merchantID, id).Scan(&sealed)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return openSecret(s.ring, id, sealed)
}

// RotateSecret gives one of the merchant's endpoints a new signing secret, which it returns. "Rotating
// it keeps the old one signing beside the new for 24 hours": the current secret becomes the previous
// one until now + RotationOverlap. Rotating again within those hours replaces the previous secret with
// the current one, so that at most two secrets sign.
func (s *Endpoints) RotateSecret(ctx context.Context, merchantID, id string, by Actor) (string, error) {
	secret := NewSecret()
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		e, err := lockEndpoint(ctx, tx, merchantID, id, now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET previous_secret = secret, previous_until = $2, secret = $3 WHERE id = $1`,
			e.ID, now.Add(RotationOverlap).UnixMilli(), sealSecret(s.ring, e.EndpointID, secret)); err != nil {
			return err
		}
		return record(ctx, tx, by, merchantID, "webhook_endpoint.rotate_secret", e.EndpointID, "", now)
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// SealedSecrets are the secret columns of a webhook_endpoints row: endpoint_id (to which the seals are
// bound), secret, previous_secret and previous_until.
type SealedSecrets struct {
	EndpointID    string
	Secret        []byte
	Previous      []byte        // nil when there is none
	PreviousUntil sql.NullInt64 // Unix milliseconds
}

// SigningSecrets opens the secrets that sign a delivery at time at: the current one first, then the
// previous one while previous_until is after at (the 24 hours after a rotation). The delivery engine
// signs with every one (Sign), as the specification allows.
func (s SealedSecrets) SigningSecrets(ring *envelope.Keyring, at time.Time) ([]string, error) {
	cur, err := openSecret(ring, s.EndpointID, s.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhook: open the secret of %s: %w", s.EndpointID, err)
	}
	out := []string{cur}
	if s.Previous != nil && s.PreviousUntil.Valid && s.PreviousUntil.Int64 > at.UnixMilli() {
		prev, err := openSecret(ring, s.EndpointID, s.Previous)
		if err != nil {
			return nil, fmt.Errorf("webhook: open the previous secret of %s: %w", s.EndpointID, err)
		}
		out = append(out, prev)
	}
	return out, nil
}

// SigningSecrets returns the secrets that sign a delivery to the endpoint whose row id is
// endpointRowID at time at (SealedSecrets.SigningSecrets): [current, previous] within 24 hours of a
// rotation, [current] otherwise.
func (s *Endpoints) SigningSecrets(ctx context.Context, endpointRowID int64, at time.Time) ([]string, error) {
	var ss SealedSecrets
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT endpoint_id, secret, previous_secret, previous_until FROM webhook_endpoints WHERE id = $1`,
			endpointRowID).Scan(&ss.EndpointID, &ss.Secret, &ss.Previous, &ss.PreviousUntil)
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: read the secrets of endpoint %d: %w", endpointRowID, err)
	}
	return ss.SigningSecrets(s.ring, at)
}

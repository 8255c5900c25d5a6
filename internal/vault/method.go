package vault

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// Payment methods are cards given to pay one payment intent (the v1 API). The number is sealed under
// the envelope keyring like a stored card's, bound to the method's id; the CVC is never stored. A
// method is usable for MethodLifetime unless a confirmation uses it first ("attaches" it to its
// intent); the outcome of that confirmation, or the expiry sweep, deletes the sealed number (data
// minimisation: a number is kept only while it may still be charged).

// MethodLifetime is how long a payment method not attached to an intent can be used.
const MethodLifetime = 15 * time.Minute

// Method is a payment method, without its number.
type Method struct {
	ID         string
	MerchantID string
	Brand      card.Brand
	Prefix     string // first six digits
	Last4      string
	Expiry     card.Expiry
	Billing    Billing
	AttachedTo string // the intent whose confirmation used it
	Sealed     bool   // its number is still held
	Livemode   bool   // created while the merchant's payments went to a live processor account
	ExpiresAt  time.Time
	CreatedAt  time.Time
}

// methodAAD binds a sealed number to its payment method.
func methodAAD(id string) []byte { return []byte("kassa payment method\x00" + id) }

const methodColumns = `pm_id, merchant_id, card_type, card_prefix, card_suffix, expiry_month, expiry_year, billing_details,
	COALESCE(attached_to, ''), pan IS NOT NULL, livemode, expires_at, created_at`

func scanMethod(s interface{ Scan(...any) error }) (Method, error) {
	var m Method
	var billing string
	var expires, created int64
	err := s.Scan(&m.ID, &m.MerchantID, &m.Brand, &m.Prefix, &m.Last4, &m.Expiry.Month, &m.Expiry.Year, &billing,
		&m.AttachedTo, &m.Sealed, &m.Livemode, &expires, &created)
	if err != nil {
		return Method{}, err
	}
	m.ExpiresAt, m.CreatedAt = time.UnixMilli(expires), time.UnixMilli(created)
	return m, json.Unmarshal([]byte(billing), &m.Billing)
}

// CreateMethod stores a payment method of the merchant. clientID names who asked, for the audit log.
func (s *Service) CreateMethod(ctx context.Context, merchantID, clientID string, nm NewMethod) (Method, error) {
	now := s.now()
	m := Method{ID: "pm_" + rand.Text()[:24], MerchantID: merchantID, Brand: card.BrandOf(nm.Number), Prefix: nm.Number.First6(),
		Last4: nm.Number.Last4(), Expiry: nm.Expiry, Billing: nm.Billing, Sealed: true, Livemode: s.ledger.Live(ctx, merchantID),
		ExpiresAt: time.UnixMilli(now.Add(MethodLifetime).UnixMilli()), CreatedAt: time.UnixMilli(now.UnixMilli())}
	billing, err := json.Marshal(m.Billing)
	if err != nil {
		return Method{}, err
	}
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO payment_methods (pm_id, merchant_id, pan, card_type, card_prefix, card_suffix,
			expiry_month, expiry_year, billing_details, expires_at, created_at, livemode) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			m.ID, merchantID, s.ring.Seal([]byte(nm.Number.Digits()), methodAAD(m.ID)), string(m.Brand), m.Prefix, m.Last4,
			m.Expiry.Month, m.Expiry.Year, string(billing), m.ExpiresAt.UnixMilli(), m.CreatedAt.UnixMilli(), m.Livemode)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Record{MerchantID: merchantID, ClientID: clientID, Operation: "payment_method.create",
			Resource: "payment_method/" + m.ID, Outcome: audit.Done, RequestID: httpapi.RequestID(ctx), At: now})
	})
	return m, err
}

// Method returns one of the merchant's payment methods. Another merchant's is not found.
func (s *Service) Method(ctx context.Context, merchantID, id string) (Method, error) {
	var m Method
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		m, err = s.method(ctx, q, merchantID, id)
		return err
	})
	return m, err
}

func (s *Service) method(ctx context.Context, q store.Querier, merchantID, id string) (Method, error) {
	m, err := scanMethod(q.QueryRowContext(ctx, `SELECT `+methodColumns+` FROM payment_methods WHERE merchant_id = $1 AND pm_id = $2`, merchantID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Method{}, &fault.Error{Status: http.StatusNotFound, Code: "not_found", Field: "payment_method",
			Message: "No payment method " + clip(id) + "."}
	}
	return m, err
}

// clip shortens an id taken from a request for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// usable says why m cannot pay intentID at now, or returns nil.
func (m Method) usable(intentID string, now time.Time) error {
	switch {
	case m.AttachedTo != "" && m.AttachedTo != intentID, m.AttachedTo == intentID && !m.Sealed:
		return &fault.Error{Status: http.StatusBadRequest, Code: "payment_method_unusable", Field: "payment_method",
			Message: "Payment method " + m.ID + " has already been used to confirm a payment; create a new one."}
	case m.AttachedTo == "" && (!m.Sealed || !now.Before(m.ExpiresAt)):
		return &fault.Error{Status: http.StatusBadRequest, Code: "payment_method_expired", Field: "payment_method",
			Message: "Payment method " + m.ID + " expired: a payment method must be used within 15 minutes of its creation; create a new one."}
	}
	return nil
}

// CheckMethod reports, in q, whether the merchant's payment method id can still pay intentID.
func (s *Service) CheckMethod(ctx context.Context, q store.Querier, merchantID, id, intentID string) (Method, error) {
	m, err := s.method(ctx, q, merchantID, id)
	if err != nil {
		return Method{}, err
	}
	return m, m.usable(intentID, s.now())
}

// AttachMethod binds the merchant's payment method id to intentID inside tx, for a confirmation: from
// then on no other intent can use it, and it no longer expires. Attaching it again to the same intent
// is allowed while its number is held (an intent confirmed again after an interrupted attempt).
func (s *Service) AttachMethod(ctx context.Context, tx *store.Tx, merchantID, id, intentID string) (Method, error) {
	now := s.now()
	r, err := tx.ExecContext(ctx, `UPDATE payment_methods SET attached_to = $3 WHERE merchant_id = $1 AND pm_id = $2
		AND pan IS NOT NULL AND (attached_to = $3 OR (attached_to IS NULL AND expires_at > $4))`, merchantID, id, intentID, now.UnixMilli())
	if err != nil {
		return Method{}, err
	}
	m, err := s.method(ctx, tx, merchantID, id)
	if err != nil {
		return Method{}, err
	}
	if n, _ := r.RowsAffected(); n != 1 {
		if err := m.usable(intentID, now); err != nil {
			return Method{}, err
		}
		return Method{}, fault.Busy("concurrent_update", "Payment method %s changed while this request ran; retry it.", id)
	}
	return m, nil
}

// OpenMethod returns the card number of the merchant's payment method, to hand to the processor.
func (s *Service) OpenMethod(ctx context.Context, merchantID, id string) (card.Number, error) {
	var sealed []byte
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT pan FROM payment_methods WHERE merchant_id = $1 AND pm_id = $2`, merchantID, id).Scan(&sealed)
	})
	if errors.Is(err, sql.ErrNoRows) || err == nil && sealed == nil {
		return card.Number{}, &fault.Error{Status: http.StatusBadRequest, Code: "payment_method_unusable", Field: "payment_method",
			Message: "Payment method " + clip(id) + " no longer holds a card number; create a new one."}
	}
	if err != nil {
		return card.Number{}, err
	}
	pan, err := s.ring.Open(sealed, methodAAD(id))
	if err != nil {
		return card.Number{}, err
	}
	return card.ParseNumber(string(pan))
}

// ConsumeMethod deletes, inside tx, the sealed number of the merchant's payment method id if it is
// attached to intentID: the confirmation that used it has its outcome, or the intent ends without
// charging it (canceled, for one, while it waits for a 3-D Secure challenge). Nothing will charge it
// again. A method only named by the intent, not attached, is left alone: it is not the
// intent's to discard, and expires by itself.
func ConsumeMethod(ctx context.Context, tx *store.Tx, merchantID, id, intentID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE payment_methods SET pan = NULL WHERE merchant_id = $1 AND pm_id = $2 AND attached_to = $3`,
		merchantID, id, intentID)
	return err
}

// ExpireMethods deletes the sealed numbers of payment methods that expired without being attached,
// and returns how many.
func (s *Service) ExpireMethods(ctx context.Context) (int64, error) {
	r, err := s.db.Exec(ctx, `UPDATE payment_methods SET pan = NULL WHERE pan IS NOT NULL AND attached_to IS NULL AND expires_at <= $1`,
		s.now().UnixMilli())
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// WireMethod is a payment method as the v1 API shows it: brand, last four digits and expiry of the
// card, never more (PCI DSS 3.4.1).
type WireMethod struct {
	ID             string      `json:"id"`
	Object         string      `json:"object"`
	Type           string      `json:"type"`
	Card           WireCard    `json:"card"`
	BillingDetails WireBilling `json:"billing_details"`
	Created        int64       `json:"created"`
	Livemode       bool        `json:"livemode"`
}

// WireCard is the card of a WireMethod.
type WireCard struct {
	Brand    string `json:"brand"`
	Last4    string `json:"last4"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
}

// WireBilling is billing details as the v1 API shows them: absent values are null.
type WireBilling struct {
	Name    *string     `json:"name"`
	Email   *string     `json:"email"`
	Phone   *string     `json:"phone"`
	Address WireAddress `json:"address"`
}

// WireAddress is a billing address as the v1 API shows it.
type WireAddress struct {
	Line1      *string `json:"line1"`
	Line2      *string `json:"line2"`
	City       *string `json:"city"`
	State      *string `json:"state"`
	PostalCode *string `json:"postal_code"`
	Country    *string `json:"country"`
}

// Wire renders m.
func (m Method) Wire() WireMethod {
	b := m.Billing
	return WireMethod{ID: m.ID, Object: "payment_method", Type: "card",
		Card: WireCard{Brand: BrandName(m.Brand), Last4: m.Last4, ExpMonth: m.Expiry.Month, ExpYear: m.Expiry.Year},
		BillingDetails: WireBilling{Name: orNull(b.Name), Email: orNull(b.Email), Phone: orNull(b.Phone),
			Address: WireAddress{Line1: orNull(b.Line1), Line2: orNull(b.Line2), City: orNull(b.City), State: orNull(b.State),
				PostalCode: orNull(b.PostalCode), Country: orNull(b.Country)}},
		Created: m.CreatedAt.Unix(), Livemode: m.Livemode}
}

// BrandName is the v1 API's spelling of a brand: lower case, and "unknown" for a number of no known
// range.
func BrandName(b card.Brand) string {
	if b == card.Other {
		return "unknown"
	}
	return strings.ToLower(string(b))
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

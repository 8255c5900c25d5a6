package vault

import (
	"context"
	"database/sql"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
)

// Subscription is a customer billed for a plan on a stored card.
type Subscription struct {
	ID               int64
	LookupID         string
	MerchantID       string
	CustomerID       int64
	CustomerLookupID string
	PlanID           int64
	PlanLookupID     string
	Name             string // the plan's name
	CardID           int64  // 0 when the card was deleted
	CardLookupID     string
	Status           string
	Amount           int64
	Currency         money.Currency
	Frequency        plan.Frequency
	NumberOfPayments int // 0: until canceled
	Email            string
	Description      string
	StartDate        time.Time
	Timezone         string
	Cycle            int
	NextRun          sql.NullInt64
	LastRun          sql.NullInt64
	LastSuccess      sql.NullInt64
	CompletedCycles  int
	FailedAttempts   int
	DelinquentCycles int
	DelinquentSince  sql.NullInt64
	MissedCycles     int
	SendReceipt      bool // the plan's
}

// Location is the time zone the subscription bills by.
func (s Subscription) Location() *time.Location {
	if loc, err := time.LoadLocation(s.Timezone); err == nil {
		return loc
	}
	return time.UTC
}

// Due is when cycle k of the subscription falls.
func (s Subscription) Due(k int) time.Time { return s.Frequency.Due(s.StartDate, k, s.Location()) }

// MissPassedCycles moves the subscription to the latest cycle due by now, recording the cycles that
// passed unpaid meanwhile (while it was suspended) as missed: they are not charged all at once.
func (s *Subscription) MissPassedCycles(now time.Time) {
	for !s.Due(s.Cycle + 1).After(now) {
		s.Cycle++
		s.MissedCycles++
	}
}

// Final reports whether the subscription can no longer change: CANCELED or EXPIRED.
func (s Subscription) Final() bool {
	return s.Status == plan.StatusCanceled || s.Status == plan.StatusExpired
}

// SubscriptionColumns is what ScanSubscription reads, for the billing engine's queries.
const SubscriptionColumns = `s.id, s.lookup_id, s.merchant_id, s.customer_id, cu.lookup_id, s.plan_id, p.lookup_id, p.name, COALESCE(s.card_id, 0),
	COALESCE(c.lookup_id, ''), s.status, s.amount, s.currency, s.scale, s.frequency, s.number_of_payments, s.email, s.description,
	s.start_date, s.timezone, s.cycle, s.next_run, s.last_run, s.last_success, s.completed_cycles, s.failed_attempts,
	s.delinquent_cycles, s.delinquent_since, s.missed_cycles, p.send_receipt`

// SubscriptionFrom is the FROM clause that goes with SubscriptionColumns.
const SubscriptionFrom = ` FROM subscriptions s JOIN customers cu ON cu.id = s.customer_id JOIN plans p ON p.id = s.plan_id
	LEFT JOIN stored_cards c ON c.id = s.card_id `

// ScanSubscription reads the SubscriptionColumns of a row.
func ScanSubscription(r interface{ Scan(...any) error }) (Subscription, error) {
	var s Subscription
	var freq string
	var start int64
	err := r.Scan(&s.ID, &s.LookupID, &s.MerchantID, &s.CustomerID, &s.CustomerLookupID, &s.PlanID, &s.PlanLookupID, &s.Name, &s.CardID, &s.CardLookupID,
		&s.Status, &s.Amount, &s.Currency.Code, &s.Currency.Digits, &freq, &s.NumberOfPayments, &s.Email, &s.Description,
		&start, &s.Timezone, &s.Cycle, &s.NextRun, &s.LastRun, &s.LastSuccess, &s.CompletedCycles, &s.FailedAttempts,
		&s.DelinquentCycles, &s.DelinquentSince, &s.MissedCycles, &s.SendReceipt)
	s.Frequency, s.StartDate = plan.Frequency(freq), time.UnixMilli(start)
	return s, err
}

// subscriptionsOf reads the subscriptions of the customers ids, oldest first.
func subscriptionsOf(ctx context.Context, q store.Querier, ids []int64) ([]Subscription, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		in[i], args[i] = "$"+strconv.Itoa(i+1), id
	}
	rows, err := q.QueryContext(ctx, `SELECT `+SubscriptionColumns+SubscriptionFrom+`WHERE s.customer_id IN (`+strings.Join(in, ", ")+`) ORDER BY s.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Subscription
	for rows.Next() {
		s, err := ScanSubscription(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// WireSubscription is a subscription as the API shows it (wire-contract.md, "Subscription"); times are
// epoch milliseconds, null when they have not happened or will not.
type WireSubscription struct {
	ID               int64       `json:"id"`
	LookupID         string      `json:"lookup_id"`
	PlanID           int64       `json:"plan_id"`
	PlanLookupID     string      `json:"plan_lookup_id"`
	CardLookupID     string      `json:"card_lookup_id"`
	Name             string      `json:"name"`
	Status           string      `json:"status"`
	Amount           json.Number `json:"amount"`
	Currency         string      `json:"currency"`
	Frequency        string      `json:"frequency"`
	Email            string      `json:"email"`
	Description      string      `json:"description"`
	StartDate        int64       `json:"start_date"`
	LastSuccess      *int64      `json:"last_success"`
	LastRun          *int64      `json:"last_run"`
	NextRun          *int64      `json:"next_run"`
	TotalCycles      *int        `json:"total_cycles"`
	CompletedCycles  int         `json:"completed_cycles"`
	RemainingCycles  *int        `json:"remaining_cycles"`
	FailedAttempts   int         `json:"failed_attempts"`
	DelinquentCycles int         `json:"delinquent_cycles"`
	DelinquentSince  *int64      `json:"delinquent_since"`
	MissedCycles     int         `json:"missed_cycles"`
}

func ptr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

// Wire renders s. total_cycles and remaining_cycles are null for a subscription until canceled.
func (s Subscription) Wire() WireSubscription {
	w := WireSubscription{ID: s.ID, LookupID: s.LookupID, PlanID: s.PlanID, PlanLookupID: s.PlanLookupID, CardLookupID: s.CardLookupID,
		Name: s.Name, Status: s.Status, Amount: json.Number(money.Format(s.Amount, s.Currency)), Currency: s.Currency.Code,
		Frequency: string(s.Frequency), Email: s.Email, Description: s.Description, StartDate: s.StartDate.UnixMilli(),
		LastSuccess: ptr(s.LastSuccess), LastRun: ptr(s.LastRun), NextRun: ptr(s.NextRun), CompletedCycles: s.CompletedCycles,
		FailedAttempts: s.FailedAttempts, DelinquentCycles: s.DelinquentCycles, DelinquentSince: ptr(s.DelinquentSince),
		MissedCycles: s.MissedCycles}
	if s.NumberOfPayments > 0 {
		total, remaining := s.NumberOfPayments, max(0, s.NumberOfPayments-s.CompletedCycles)
		w.TotalCycles, w.RemainingCycles = &total, &remaining
	}
	return w
}

// SubscriptionBody is the body of subscription create and update (gateway-api.md, "Subscription"): the
// API's JSON, or the dashboard's form read into the same fields (field.Form).
type SubscriptionBody struct {
	PlanLookupID field.Value `json:"plan_lookup_id"`
	CardLookupID field.Value `json:"card_lookup_id"`
	Amount       field.Value `json:"amount"`
	StartDate    field.Value `json:"start_date"`
	Email        field.Value `json:"email"`
	Description  field.Value `json:"description"`
	Status       field.Value `json:"status"`
}

// startGrace is how far in the past a start_date may be: it counts as now.
const startGrace = time.Hour

// subscribe creates a subscription for the customer and returns the customer.
func (s *Service) subscribe(ctx context.Context, m merchant.Merchant, customerLookup string, b SubscriptionBody) (Customer, error) {
	planLookup, err := b.PlanLookupID.Str("plan_lookup_id")
	if err != nil {
		return Customer{}, err
	}
	if planLookup == "" {
		return Customer{}, fault.Invalid("plan_lookup_id", "plan_lookup_id is required")
	}
	now := s.now()
	start := now
	if b.StartDate.Set() {
		ms, err := b.StartDate.Digits("start_date")
		v, convErr := strconv.ParseInt(ms, 10, 64)
		if err != nil || convErr != nil || ms == "" {
			return Customer{}, fault.Invalid("start_date", "start_date must be milliseconds since the Unix epoch")
		}
		switch at := time.UnixMilli(v); {
		case at.Before(now.Add(-startGrace)):
			return Customer{}, fault.Invalid("start_date", "start_date is in the past; at most an hour ago counts as now")
		case at.After(now):
			start = at
		}
	}
	description, err := b.Description.Text("description", 500)
	if err != nil {
		return Customer{}, err
	}
	var c Customer
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = s.lockCustomer(ctx, tx, m.ID, customerLookup); err != nil {
			return err
		}
		p, err := plan.Get(ctx, tx, m.ID, planLookup)
		if err != nil {
			return fault.Invalid("plan_lookup_id", "plan_lookup_id %s is not a plan of this merchant", planLookup)
		}
		cd, err := subscriptionCard(c, b.CardLookupID)
		if err != nil {
			return err
		}
		amount := p.Amount
		if b.Amount.Set() {
			if amount, err = subscriptionAmount(b.Amount, p.Currency, m); err != nil {
				return err
			}
		}
		email := c.Email
		if b.Email.Set() {
			if email, err = subscriptionEmail(b.Email); err != nil {
				return err
			}
		}
		subLookup := newLookupID()
		_, err = tx.ExecContext(ctx, `INSERT INTO subscriptions (lookup_id, merchant_id, customer_id, plan_id, card_id, status, amount,
			currency, scale, frequency, number_of_payments, email, description, start_date, timezone, next_run, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 'ACTIVE', $6, $7, $8, $9, $10, $11, $12, $13, $14, $13, $15, $15)`,
			subLookup, m.ID, c.ID, p.ID, cd.ID, amount, p.Currency.Code, p.Currency.Digits, string(p.Frequency),
			p.NumberOfPayments, email, description, start.UnixMilli(), m.Location().String(), now.UnixMilli())
		if err != nil {
			return err
		}
		if err := audit.Change(ctx, tx, m.ID, "subscription.create", SubscriptionResource(customerLookup, subLookup), now); err != nil {
			return err
		}
		if c.Subscriptions, err = subscriptionsOf(ctx, tx, []int64{c.ID}); err != nil {
			return err
		}
		for _, sub := range c.Subscriptions {
			if sub.LookupID == subLookup {
				return RecordSubscription(ctx, tx, event.SubscriptionCreated, sub, now)
			}
		}
		return nil
	})
	if err == nil && s.kick != nil && !start.After(now) {
		s.kick() // the first cycle is due now: let the billing engine see it at once
	}
	return c, err
}

// SubscriptionResource names a subscription in the audit log.
func SubscriptionResource(customerLookup, lookupID string) string {
	return "customer/" + customerLookup + "/subscription/" + lookupID
}

// subscriptionCard is the card a subscription bills: card_lookup_id, or the customer's default.
func subscriptionCard(c Customer, v field.Value) (Card, error) {
	lookup, err := v.Str("card_lookup_id")
	if err != nil {
		return Card{}, err
	}
	if lookup == "" {
		if cd, ok := c.defaultCard(); ok {
			return cd, nil
		}
		return Card{}, fault.Invalid("card_lookup_id", "card_lookup_id is required: the customer has no stored card")
	}
	cd, ok := c.card(lookup)
	if !ok {
		return Card{}, fault.Invalid("card_lookup_id", "card_lookup_id %s is not a card of this customer", lookup)
	}
	return cd, nil
}

func subscriptionAmount(v field.Value, cur money.Currency, m merchant.Merchant) (int64, error) {
	amount, _, err := v.Amount("amount", cur)
	switch {
	case err != nil:
		return 0, err
	case amount == 0:
		return 0, fault.Invalid("amount", "amount must be greater than 0")
	case !m.WithinMax(amount, cur):
		return 0, fault.Invalid("amount", "amount exceeds this merchant's maximum of %s", m.MaxAmount())
	}
	return amount, nil
}

func subscriptionEmail(v field.Value) (string, error) {
	email, err := v.Text("email", 254)
	if err != nil {
		return "", err
	}
	if err := merchant.ValidateEmail(email); err != nil {
		return "", fault.Invalid("email", "email %s", err)
	}
	return email, nil
}

// Subscription reads a subscription of one of the merchant's customers; another merchant's is not
// found.
func (s *Service) Subscription(ctx context.Context, q store.Querier, merchantID, customerLookup, lookupID string) (Subscription, error) {
	sub, err := ScanSubscription(q.QueryRowContext(ctx, `SELECT `+SubscriptionColumns+SubscriptionFrom+
		`WHERE s.merchant_id = $1 AND cu.lookup_id = $2 AND s.lookup_id = $3`,
		merchantID, customerLookup, lookupID))
	if isNoRows(err) {
		return Subscription{}, fault.NotFound("No subscription %s for customer %s.", lookupID, customerLookup)
	}
	return sub, err
}

// ChangeSubscription applies a PATCH: status (ACTIVE, PAUSED or CANCELED), amount, card_lookup_id,
// email, description. CANCELED and EXPIRED are final: any change to them is a 409.
//
// Resuming a PAUSED subscription skips the cycles that passed while it was paused and bills from the
// next one due; reactivating a SUSPENDED one charges the current cycle at once, and records the cycles
// that passed unpaid meanwhile as missed.
func (s *Service) ChangeSubscription(ctx context.Context, m merchant.Merchant, customerLookup, lookupID string, b SubscriptionBody) (Subscription, error) {
	status := ""
	if b.Status.Set() {
		v, err := b.Status.Str("status")
		if err != nil {
			return Subscription{}, err
		}
		switch status = strings.ToUpper(v); status {
		case "CANCELLED":
			status = plan.StatusCanceled
		case plan.StatusActive, plan.StatusPaused, plan.StatusCanceled:
		default:
			return Subscription{}, fault.Invalid("status", "status must be ACTIVE, PAUSED or CANCELED")
		}
	}
	description, err := b.Description.Text("description", 500)
	if err != nil {
		return Subscription{}, err
	}
	var sub Subscription
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		c, err := s.lockCustomer(ctx, tx, m.ID, customerLookup)
		if err != nil {
			return err
		}
		if sub, err = s.Subscription(ctx, tx, m.ID, customerLookup, lookupID); err != nil {
			return err
		}
		if sub.Final() {
			return fault.Conflict("subscription_final", "Subscription %s is %s; it cannot change.", lookupID, sub.Status)
		}
		before := sub.Wire()
		now := s.now()
		if b.Amount.Set() {
			if sub.Amount, err = subscriptionAmount(b.Amount, sub.Currency, m); err != nil {
				return err
			}
		}
		if b.Email.Set() {
			if sub.Email, err = subscriptionEmail(b.Email); err != nil {
				return err
			}
		}
		if b.Description.Set() {
			sub.Description = description
		}
		if b.CardLookupID.Set() {
			cd, err := subscriptionCard(c, b.CardLookupID)
			if err != nil {
				return err
			}
			sub.CardID, sub.CardLookupID = cd.ID, cd.LookupID
		}
		switch {
		case status == "" || status == sub.Status:
		case status == plan.StatusCanceled, status == plan.StatusPaused:
			sub.Status, sub.NextRun = status, sql.NullInt64{}
		case sub.Status == plan.StatusPaused: // → ACTIVE: from the next cycle due
			for !sub.Due(sub.Cycle).After(now) {
				sub.Cycle++
			}
			sub.Status, sub.FailedAttempts = plan.StatusActive, 0
			sub.NextRun = sql.NullInt64{Int64: sub.Due(sub.Cycle).UnixMilli(), Valid: true}
		default: // SUSPENDED or RETRY → ACTIVE: charge the current cycle now
			sub.MissPassedCycles(now)
			sub.Status, sub.FailedAttempts = plan.StatusActive, 0
			sub.NextRun = sql.NullInt64{Int64: now.UnixMilli(), Valid: true}
		}
		cardID := sql.NullInt64{Int64: sub.CardID, Valid: sub.CardID != 0}
		_, err = tx.ExecContext(ctx, `UPDATE subscriptions SET status = $2, amount = $3, email = $4, description = $5, card_id = $6,
			cycle = $7, next_run = $8, failed_attempts = $9, missed_cycles = $10, updated_at = $11 WHERE id = $1`,
			sub.ID, sub.Status, sub.Amount, sub.Email, sub.Description, cardID, sub.Cycle, sub.NextRun, sub.FailedAttempts,
			sub.MissedCycles, now.UnixMilli())
		if err != nil {
			return err
		}
		switch {
		case sub.Status == plan.StatusCanceled:
			err = RecordSubscription(ctx, tx, event.SubscriptionCanceled, sub, now)
		case !reflect.DeepEqual(sub.Wire(), before): // a change that leaves it as the API shows it reports nothing
			err = RecordSubscription(ctx, tx, event.SubscriptionUpdated, sub, now)
		}
		if err != nil {
			return err
		}
		return audit.Change(ctx, tx, m.ID, "subscription.update", SubscriptionResource(customerLookup, lookupID), now)
	})
	if err == nil && s.kick != nil && sub.NextRun.Valid && sub.NextRun.Int64 <= s.now().UnixMilli() {
		s.kick()
	}
	return sub, err
}

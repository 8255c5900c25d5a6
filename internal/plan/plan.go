package plan

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Plan is a payment template (gateway-api.md, "Plan").
type Plan struct {
	ID                   int64
	LookupID             string
	MerchantID           string
	Name                 string
	Amount               int64
	Currency             money.Currency
	Frequency            Frequency
	NumberOfPayments     int // 0: until canceled
	SendReceipt          bool
	TotalSubscriptions   int
	CurrentSubscriptions int
}

// Service is the plan service.
type Service struct {
	db        *store.DB
	merchants *merchant.Cache
	now       func() time.Time
}

// New returns the plan service.
func New(db *store.DB, merchants *merchant.Cache, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{db: db, merchants: merchants, now: now}
}

const columns = `p.id, p.lookup_id, p.merchant_id, p.name, p.amount, p.currency, p.scale, p.frequency, p.number_of_payments,
	p.send_receipt, (SELECT COUNT(*) FROM subscriptions s WHERE s.plan_id = p.id),
	(SELECT COUNT(*) FROM subscriptions s WHERE s.plan_id = p.id AND s.status IN ` + CurrentStatusesSQL + `)`

func scan(s interface{ Scan(...any) error }) (Plan, error) {
	var p Plan
	var freq string
	err := s.Scan(&p.ID, &p.LookupID, &p.MerchantID, &p.Name, &p.Amount, &p.Currency.Code, &p.Currency.Digits, &freq,
		&p.NumberOfPayments, &p.SendReceipt, &p.TotalSubscriptions, &p.CurrentSubscriptions)
	p.Frequency = Frequency(freq)
	return p, err
}

// Get reads a live plan of the merchant; a deleted or another merchant's plan is not found.
func Get(ctx context.Context, q store.Querier, merchantID, lookupID string) (Plan, error) {
	p, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM plans p WHERE p.merchant_id = $1 AND p.lookup_id = $2 AND p.deleted_at IS NULL`,
		merchantID, lookupID))
	if errors.Is(err, sql.ErrNoRows) {
		return Plan{}, fault.NotFound("No plan %s.", lookupID)
	}
	return p, err
}

// Body is the body of plan create and update: the API's JSON, or the dashboard's form read into
// the same fields (field.Form), checked by the same rules.
type Body struct {
	Name             field.Value `json:"name"`
	Amount           field.Value `json:"amount"`
	Currency         field.Value `json:"currency"`
	Frequency        field.Value `json:"frequency"`
	NumberOfPayments field.Value `json:"number_of_payments"`
	SendReceipt      field.Value `json:"send_receipt"`
}

// apply validates the fields the body sends into p. On create every required field must be there.
func (b Body) apply(p *Plan, m merchant.Merchant, create bool) error {
	if b.Name.Set() || create {
		name, err := b.Name.Text("name", 100)
		if err != nil {
			return err
		}
		if name == "" {
			return fault.Invalid("name", "name is required")
		}
		p.Name = name
	}
	if b.Currency.Set() || create {
		amount := b.Amount
		if !amount.Set() && !create {
			// A new currency needs the amount again: its decimals may differ.
			return fault.Invalid("amount", "amount is required when the currency changes")
		}
		var err error
		if p.Amount, p.Currency, err = payment.ChargeAmount(payment.KindSale, amount, b.Currency, m); err != nil {
			return err
		}
	} else if b.Amount.Set() {
		v, _, err := b.Amount.Amount("amount", p.Currency)
		switch {
		case err != nil:
			return err
		case v == 0:
			return fault.Invalid("amount", "amount must be greater than 0")
		case !m.WithinMax(v, p.Currency):
			return fault.Invalid("amount", "amount exceeds this merchant's maximum of %s", m.MaxAmount())
		}
		p.Amount = v
	}
	if b.Frequency.Set() || create {
		s, err := b.Frequency.Str("frequency")
		if err != nil {
			return err
		}
		f, ok := ParseFrequency(s)
		if !ok {
			return fault.Invalid("frequency", "frequency must be DAILY, WEEKLY, MONTHLY, QUARTERLY or ANNUALLY")
		}
		p.Frequency = f
	}
	if b.NumberOfPayments.Set() {
		s, err := b.NumberOfPayments.Digits("number_of_payments")
		n, convErr := strconv.Atoi(s)
		if err != nil || convErr != nil || n > 10000 {
			return fault.Invalid("number_of_payments", "number_of_payments must be a whole number from 0 (until canceled) to 10000")
		}
		p.NumberOfPayments = n
	}
	if b.SendReceipt.Set() {
		v, err := b.SendReceipt.Flag("send_receipt")
		if err != nil {
			return err
		}
		p.SendReceipt = v
	}
	return nil
}

func nameTaken() error {
	return fault.Conflict("plan_name_taken", "This merchant already has a plan of that name.")
}

// Create makes a plan of the merchant from b: every required field checked, each error naming its
// field; a name the merchant already uses is a 409.
func (s *Service) Create(ctx context.Context, m merchant.Merchant, b Body) (Plan, error) {
	p := Plan{LookupID: rand.Text()[:10], MerchantID: m.ID}
	if err := b.apply(&p, m, true); err != nil {
		return Plan{}, err
	}
	if utf8.RuneCountInString(p.Name) == 0 {
		return Plan{}, fault.Invalid("name", "name is required")
	}
	now := s.now().UnixMilli()
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if err := tx.QueryRowContext(ctx, `INSERT INTO plans (lookup_id, merchant_id, name, name_key, amount, currency, scale, frequency,
			number_of_payments, send_receipt, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING id`,
			p.LookupID, m.ID, p.Name, strings.ToLower(p.Name), p.Amount, p.Currency.Code, p.Currency.Digits, string(p.Frequency),
			p.NumberOfPayments, p.SendReceipt, now).Scan(&p.ID); err != nil {
			return err
		}
		if err := event.Record(ctx, tx, m.ID, event.PlanCreated, p.Wire(), s.now()); err != nil {
			return err
		}
		return audit.Change(ctx, tx, m.ID, "plan.create", "plan/"+p.LookupID, s.now())
	})
	if store.IsUniqueViolation(err) {
		return Plan{}, nameTaken()
	}
	return p, err
}

// Update changes the fields b sends of one of the merchant's plans. The subscriptions to it keep the
// terms they were made with.
func (s *Service) Update(ctx context.Context, m merchant.Merchant, lookupID string, b Body) (Plan, error) {
	var p Plan
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if p, err = Get(ctx, tx, m.ID, lookupID); err != nil {
			return err
		}
		before := p.Wire()
		if err := b.apply(&p, m, false); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE plans SET name = $2, name_key = $3, amount = $4, currency = $5, scale = $6, frequency = $7,
			number_of_payments = $8, send_receipt = $9, updated_at = $10 WHERE id = $1`,
			p.ID, p.Name, strings.ToLower(p.Name), p.Amount, p.Currency.Code, p.Currency.Digits, string(p.Frequency),
			p.NumberOfPayments, p.SendReceipt, s.now().UnixMilli())
		if err != nil {
			return err
		}
		// An update that leaves the plan as the API shows it reports nothing.
		if p.Wire() != before {
			if err := event.Record(ctx, tx, m.ID, event.PlanUpdated, p.Wire(), s.now()); err != nil {
				return err
			}
		}
		return audit.Change(ctx, tx, m.ID, "plan.update", "plan/"+lookupID, s.now())
	})
	if store.IsUniqueViolation(err) {
		return Plan{}, nameTaken()
	}
	return p, err
}

// Remove deletes a plan without current subscriptions; one with current subscriptions is the 409
// plan_in_use. The row stays, marked deleted, for the subscriptions that ended under it.
func (s *Service) Remove(ctx context.Context, merchantID, lookupID string) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		p, err := Get(ctx, tx, merchantID, lookupID)
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `UPDATE plans SET deleted_at = $2 WHERE id = $1 AND NOT EXISTS
			(SELECT 1 FROM subscriptions s WHERE s.plan_id = plans.id AND s.status IN `+CurrentStatusesSQL+`)`, p.ID, s.now().UnixMilli())
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fault.Conflict("plan_in_use", "Plan %s has current subscriptions; cancel them before deleting it.", lookupID)
		}
		// The plan as the API showed it last.
		if err := event.Record(ctx, tx, merchantID, event.PlanDeleted, p.Wire(), s.now()); err != nil {
			return err
		}
		return audit.Change(ctx, tx, merchantID, "plan.delete", "plan/"+lookupID, s.now())
	})
}

// List returns a page of the merchant's live plans, newest first: at most limit, older than the plan
// of row id after, or newer than the plan of row id before.
func (s *Service) List(ctx context.Context, merchantID string, limit int, before, after int64) ([]Plan, error) {
	where := "p.merchant_id = $1 AND p.deleted_at IS NULL"
	args := []any{merchantID}
	order := "DESC"
	if after > 0 {
		args = append(args, after)
		where += " AND p.id < $2"
	} else if before > 0 {
		args = append(args, before)
		where += " AND p.id > $2"
		order = "ASC"
	}
	args = append(args, limit)
	var out []Plan
	err := s.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT `+columns+` FROM plans p WHERE `+where+` ORDER BY p.id `+order+
			` LIMIT $`+strconv.Itoa(len(args)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	if order == "ASC" {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, err
}

// Wire is a plan as the API shows it (wire-contract.md, "Plan").
type Wire struct {
	ID                   int64       `json:"id"`
	LookupID             string      `json:"lookup_id"`
	Name                 string      `json:"name"`
	Amount               json.Number `json:"amount"`
	Currency             string      `json:"currency"`
	Frequency            string      `json:"frequency"`
	NumberOfPayments     int         `json:"number_of_payments"`
	SendReceipt          bool        `json:"send_receipt"`
	TotalSubscriptions   int         `json:"total_subscriptions"`
	CurrentSubscriptions int         `json:"current_subscriptions"`
}

// Wire renders p.
func (p Plan) Wire() Wire {
	return Wire{ID: p.ID, LookupID: p.LookupID, Name: p.Name, Amount: json.Number(money.Format(p.Amount, p.Currency)),
		Currency: p.Currency.Code, Frequency: string(p.Frequency), NumberOfPayments: p.NumberOfPayments,
		SendReceipt: p.SendReceipt, TotalSubscriptions: p.TotalSubscriptions, CurrentSubscriptions: p.CurrentSubscriptions}
}

// Routes registers the plan service.
func (s *Service) Routes(r *httpapi.Router, protect func(http.Handler) http.Handler) {
	r.Handle("POST", "/plan-service/plan", protect(http.HandlerFunc(s.handleCreate)))
	r.Handle("GET", "/plan-service/plan", protect(http.HandlerFunc(s.handleList)))
	r.Handle("GET", "/plan-service/plan/{p}", protect(http.HandlerFunc(s.handleGet)))
	r.Handle("PUT", "/plan-service/plan/{p}", protect(http.HandlerFunc(s.handleUpdate)))
	r.Handle("PATCH", "/plan-service/plan/{p}", protect(http.HandlerFunc(s.handleUpdate)))
	r.Handle("DELETE", "/plan-service/plan/{p}", protect(http.HandlerFunc(s.handleDelete)))
}

func (s *Service) handleCreate(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b Body
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var p Plan
	if err == nil {
		p, err = s.Create(r.Context(), m, b)
	}
	writePlan(w, r, p, err)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var p Plan
	if err == nil {
		err = s.db.Read(r.Context(), func(q store.Querier) error {
			p, err = Get(r.Context(), q, who.MerchantID, r.PathValue("p"))
			return err
		})
	}
	writePlan(w, r, p, err)
}

func (s *Service) handleUpdate(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b Body
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var p Plan
	if err == nil {
		p, err = s.Update(r.Context(), m, r.PathValue("p"), b)
	}
	writePlan(w, r, p, err)
}

func (s *Service) handleDelete(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	if err == nil {
		err = s.Remove(r.Context(), who.MerchantID, r.PathValue("p"))
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"lookup_id": r.PathValue("p"), "deleted": true})
}

func (s *Service) handleList(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	limit, before, after, err := httpapi.PageParams(r.URL.Query(), payment.DefaultLimit, payment.MaxLimit)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	ps, err := s.List(r.Context(), who.MerchantID, limit, before, after)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := httpapi.Page[Wire]{Entities: make([]Wire, len(ps))}
	for i, p := range ps {
		out.Entities[i] = p.Wire()
	}
	if n := len(ps); n > 0 {
		out.SetCursors(ps[0].ID, ps[n-1].ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func writePlan(w http.ResponseWriter, r *http.Request, p Plan, err error) {
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, p.Wire())
}

package payment

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
)

// Service is the transaction service of the gateway API.
type Service struct {
	ledger    *Ledger
	merchants *merchant.Cache
	tokens    *cardenc.Service
}

// NewService returns the transaction service over ledger; tokens opens card tokens.
func NewService(ledger *Ledger, merchants *merchant.Cache, tokens *cardenc.Service) *Service {
	return &Service{ledger: ledger, merchants: merchants, tokens: tokens}
}

// openToken puts the card of a card token into c, and the token, which the ledger consumes with the
// attempt. Whatever is wrong with the token, the answer is the same (see cardenc.ErrInvalidToken).
func (s *Service) openToken(ctx context.Context, merchantID, token string, c *Charge) error {
	card, err := s.tokens.Open(ctx, merchantID, token)
	if err != nil {
		return cardenc.AsFault(err)
	}
	c.Card, c.Expiry, c.CVV, c.Token = card.Number, card.Expiry, card.CVV, &card.Token
	return nil
}

// Routes registers the transaction service. protect wraps each handler with what every route of the
// service needs (the bearer check, idempotency).
func (s *Service) Routes(r *httpapi.Router, protect func(http.Handler) http.Handler) {
	r.Handle("POST", "/transaction-service/sale", protect(s.charge(KindSale)))
	r.Handle("POST", "/transaction-service/authorize", protect(s.charge(KindAuthorization)))
	r.Handle("POST", "/transaction-service/capture/{id}", protect(s.followUp(KindCapture)))
	r.Handle("POST", "/transaction-service/refund/{id}", protect(s.followUp(KindRefund)))
	r.Handle("POST", "/transaction-service/void/{id}", protect(s.followUp(KindVoid)))
	// The spec lists with POST; newer clients use GET. Both read the query string.
	r.Handle("POST", "/transaction-service/transaction", protect(http.HandlerFunc(s.list)))
	r.Handle("GET", "/transaction-service/transaction", protect(http.HandlerFunc(s.list)))
	r.Handle("GET", "/transaction-service/transaction/{id}", protect(http.HandlerFunc(s.get)))
	r.Handle("GET", "/transaction-service/transaction/lookup/{transaction_id}", protect(http.HandlerFunc(s.lookup)))
}

// actor reads who is asking.
func (s *Service) actor(ctx context.Context) (Actor, merchant.Merchant, error) {
	return Who(ctx, s.merchants)
}

// Who reads who is asking: the merchant and client of the request's bearer token.
func Who(ctx context.Context, merchants *merchant.Cache) (Actor, merchant.Merchant, error) {
	c := auth.ClaimsFrom(ctx)
	m, err := merchants.Get(ctx, c.MerchantID)
	if errors.Is(err, merchant.ErrNotFound) {
		err = fault.New(http.StatusUnauthorized, "invalid_token", "The access token's merchant no longer exists.")
	}
	if err != nil {
		return Actor{}, merchant.Merchant{}, err
	}
	p, _ := httpapi.PrincipalFrom(ctx) // the token's (auth.Claims.Principal), put there by the bearer check
	return Actor{MerchantID: m.ID, ClientID: c.ClientIDString(), RequestID: httpapi.RequestID(ctx), Profile: m.SimulatorProfile, Location: m.Location(),
		Principal: p, Velocity: m.Velocity}, m, nil
}

// Respond answers a card operation with its transaction, approved or declined — "A decline is HTTP
// 200 with transaction_result DECLINED" (wire-contract.md, Transactions) — and the rate-limit headers
// of the velocity limit that declined it, if one did; or with err.
func Respond(w http.ResponseWriter, r *http.Request, t Transaction, err error) {
	if err != nil {
		httpapi.WriteError(w, r, cardenc.AsFault(err)) // a token used before is as unusable as any
		return
	}
	if t.Limit != nil {
		httpapi.WriteRateLimit(w.Header(), t.Limit)
	}
	httpapi.WriteJSON(w, http.StatusOK, t.Wire())
}

func (s *Service) charge(kind string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		who, m, err := s.actor(ctx)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var body chargeBody
		if err := httpapi.DecodeJSON(r, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		c, token, err := body.charge(kind, m)
		if err == nil && token != "" {
			err = s.openToken(ctx, m.ID, token, &c)
		}
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		c.Actor, c.Source, c.IdempotencyKey = who, SourceEcommerce, idempotency.Key(ctx)
		t, err := s.ledger.Charge(ctx, c)
		Respond(w, r, t, err)
	})
}

func (s *Service) followUp(kind string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		who, _, err := s.actor(ctx)
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		parent, err := s.ledger.Get(ctx, who.MerchantID, r.PathValue("id"))
		if err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var body followUpBody
		if err := httpapi.DecodeJSON(r, &body); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		f := FollowUp{Actor: who, ParentID: parent.ID, IdempotencyKey: idempotency.Key(ctx)}
		if f.Amount, err = followUpAmount(kind, body, parent); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		if f.TestMode, err = body.TestMode.Flag("test_mode"); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		var t Transaction
		switch kind {
		case KindCapture:
			t, err = s.ledger.Capture(ctx, f)
		case KindRefund:
			t, err = s.ledger.Refund(ctx, f)
		default:
			t, err = s.ledger.Void(ctx, f)
		}
		Respond(w, r, t, err)
	})
}

// followUpAmount reads the amount of a capture (default: the whole authorization) or a refund
// (required), in the parent's currency. A void takes no amount.
func followUpAmount(kind string, b followUpBody, parent Transaction) (int64, error) {
	if cur, err := b.Currency.Str("currency"); err != nil {
		return 0, err
	} else if cur != "" && !strings.EqualFold(cur, parent.Currency.Code) {
		return 0, fault.Invalid("currency", "currency must be that of transaction %d (%s)", parent.ID, parent.Currency.Code)
	}
	if kind == KindVoid {
		return 0, nil
	}
	v, set, err := b.Amount.Amount("amount", parent.Currency)
	switch {
	case err != nil:
		return 0, err
	case !set && kind == KindCapture:
		return parent.Amount, nil
	case !set:
		return 0, fault.Invalid("amount", "amount is required")
	case v == 0:
		return 0, fault.Invalid("amount", "amount must be greater than 0")
	}
	return v, nil
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	s.show(w, r, r.PathValue("id"))
}

func (s *Service) lookup(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("transaction_id")
	if len(ref) != transactionIDLen {
		httpapi.WriteError(w, r, fault.NotFound("No transaction %s.", ref))
		return
	}
	s.show(w, r, ref)
}

func (s *Service) show(w http.ResponseWriter, r *http.Request, ref string) {
	t, err := s.ledger.Get(r.Context(), auth.ClaimsFrom(r.Context()).MerchantID, ref)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, t.Wire())
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	p, err := s.ledger.List(r.Context(), auth.ClaimsFrom(r.Context()).MerchantID, f)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	resp := httpapi.Page[Wire]{Entities: make([]Wire, len(p.Transactions))}
	for i, t := range p.Transactions {
		resp.Entities[i] = t.Wire()
	}
	if n := len(p.Transactions); n > 0 {
		resp.SetCursors(p.Transactions[0].ID, p.Transactions[n-1].ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, resp)
}

// parseFilter reads the list's query parameters; each bad one is a 400 naming it.
func parseFilter(q url.Values) (Filter, error) {
	var f Filter
	var err error
	if f.Limit, f.Before, f.After, err = httpapi.PageParams(q, DefaultLimit, MaxLimit); err != nil {
		return f, err
	}
	for _, d := range []struct {
		name string
		dst  *time.Time
		add  int
	}{{"from_date", &f.From, 0}, {"to_date", &f.To, 1}} {
		if v := q.Get(d.name); v != "" {
			t, err := time.Parse(time.DateOnly, v)
			if err != nil {
				return f, fault.Invalid(d.name, "%s must be a date as YYYY-MM-DD", d.name)
			}
			*d.dst = t.AddDate(0, 0, d.add) // to_date includes its whole day
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, fault.Invalid("to_date", "to_date must not be before from_date")
	}
	if v := q.Get("transaction_status"); v != "" {
		switch strings.ToUpper(v) {
		case StatusApproved, StatusDeclined:
			f.Result = strings.ToUpper(v)
		default:
			return f, fault.Invalid("transaction_status", "transaction_status must be APPROVED or DECLINED")
		}
	}
	for _, a := range []struct {
		name string
		dst  **int64
	}{{"min_amount", &f.MinAmount}, {"max_amount", &f.MaxAmount}} {
		if v := q.Get(a.name); v != "" {
			n, err := money.Parse(v, money.Currency{Code: "any currency", Digits: 4})
			if err != nil {
				return f, fault.Invalid(a.name, "%s %s", a.name, err)
			}
			*a.dst = &n
		}
	}
	f.Email, f.FirstName, f.LastName = q.Get("email_address"), q.Get("first_name"), q.Get("last_name")
	return f, nil
}

package vault

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
)

// Routes registers the customer service and the stored-card payment routes of the transaction
// service. protect wraps each handler with what every gateway route needs (bearer check, idempotency).
func (s *Service) Routes(r *httpapi.Router, protect func(http.Handler) http.Handler) {
	h := func(f http.HandlerFunc) http.Handler { return protect(f) }
	r.Handle("POST", "/customer-service/customer", h(s.create))
	r.Handle("GET", "/customer-service/customer", h(s.list))
	r.Handle("GET", "/customer-service/customer/{c}", h(s.get))
	r.Handle("PUT", "/customer-service/customer/{c}", h(s.update))
	r.Handle("DELETE", "/customer-service/customer/{c}", h(s.remove))
	// The spec's shared path: a body with card fields (or a token) stores a card; one with an amount
	// pays with the default card.
	r.Handle("POST", "/customer-service/customer/{c}/card", h(s.cardOrPay))
	r.Handle("POST", "/customer-service/customer/{c}/card/{card}", h(s.payWith(payment.KindSale)))
	r.Handle("PATCH", "/customer-service/customer/{c}/card/{card}", h(s.patchCard))
	r.Handle("DELETE", "/customer-service/customer/{c}/card/{card}", h(s.removeCard))
	r.Handle("POST", "/customer-service/customer/{c}/subscription", h(s.createSubscription))
	r.Handle("GET", "/customer-service/customer/{c}/subscription/{s}", h(s.getSubscription))
	r.Handle("PATCH", "/customer-service/customer/{c}/subscription/{s}", h(s.patchSubscription))
	r.Handle("GET", "/customer-service/customer/plan/{plan}", h(s.planCustomers))
	for _, kind := range []string{payment.KindSale, payment.KindAuthorization} {
		op := map[string]string{payment.KindSale: "sale", payment.KindAuthorization: "authorize"}[kind]
		r.Handle("POST", "/transaction-service/"+op+"/customer/{c}", h(s.payWith(kind)))
		r.Handle("POST", "/transaction-service/"+op+"/customer/{c}/card/{card}", h(s.payWith(kind)))
	}
}

// wireCard is a stored card as the API shows it (wire-contract.md, "Card inside a customer").
type wireCard struct {
	ID              int64  `json:"id"`
	LookupID        string `json:"lookup_id"`
	CardExpiry      string `json:"card_expiry"`
	CardPrefix      string `json:"card_prefix"`
	CardSuffix      string `json:"card_suffix"`
	CardType        string `json:"card_type"`
	IsDefault       bool   `json:"is_default"`
	CardDescription string `json:"card_description"`
}

func (cd Card) wire() wireCard {
	return wireCard{ID: cd.ID, LookupID: cd.LookupID, CardExpiry: cd.Expiry.String(), CardPrefix: cd.Prefix[:4], CardSuffix: cd.Suffix,
		CardType: cd.Type, IsDefault: cd.IsDefault, CardDescription: cd.Description}
}

// wireCustomer is a customer as the API shows it.
type wireCustomer struct {
	ID            int64              `json:"id"`
	LookupID      string             `json:"lookup_id"`
	Email         string             `json:"email"`
	FirstName     string             `json:"first_name"`
	LastName      string             `json:"last_name"`
	Company       string             `json:"company"`
	BccEmails     string             `json:"bcc_emails"`
	Telephone     string             `json:"telephone"`
	Address1      string             `json:"address1"`
	Address2      string             `json:"address2"`
	City          string             `json:"city"`
	Province      string             `json:"province"`
	Country       string             `json:"country"`
	PostalCode    string             `json:"postal_code"`
	CustomID      string             `json:"custom_id"`
	Cards         []wireCard         `json:"cards"`
	Subscriptions []WireSubscription `json:"subscriptions"`
}

func (c Customer) wire() wireCustomer {
	d := c.Details
	w := wireCustomer{ID: c.ID, LookupID: c.LookupID, Email: d.Email, FirstName: d.FirstName, LastName: d.LastName,
		Company: d.Company, BccEmails: d.BccEmails, Telephone: d.Telephone, Address1: d.Address1, Address2: d.Address2,
		City: d.City, Province: d.Province, Country: d.Country, PostalCode: d.PostalCode, CustomID: d.CustomID,
		Cards: []wireCard{}, Subscriptions: []WireSubscription{}}
	for _, cd := range c.Cards {
		w.Cards = append(w.Cards, cd.wire())
	}
	for _, sub := range c.Subscriptions {
		w.Subscriptions = append(w.Subscriptions, sub.Wire())
	}
	return w
}

// respond writes v, or the error.
func respond[T any](w http.ResponseWriter, r *http.Request, v T, err error, wire func(T) any) {
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wire(v))
}

func customerWire(c Customer) any { return c.wire() }

func (s *Service) create(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var b detailsBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var c Customer
	if err == nil {
		var d Details
		if err = b.apply(&d); err == nil {
			c, err = s.createCustomer(r.Context(), who.MerchantID, d)
		}
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) get(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var c Customer
	if err == nil {
		c, err = s.Get(r.Context(), who.MerchantID, r.PathValue("c"))
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) update(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var b detailsBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var c Customer
	if err == nil {
		c, err = s.updateCustomer(r.Context(), who.MerchantID, r.PathValue("c"), &b)
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) remove(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	if err == nil {
		err = s.deleteCustomer(r.Context(), who.MerchantID, r.PathValue("c"))
	}
	respond(w, r, r.PathValue("c"), err, func(id string) any { return map[string]any{"lookup_id": id, "deleted": true} })
}

// cardOrPayBody is the body of the shared path: a card to store, or an amount to pay.
type cardOrPayBody struct {
	cardBody
	payBody
}

func (s *Service) cardOrPay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	who, m, err := payment.Who(ctx, s.merchants)
	var b cardOrPayBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	switch {
	case b.CardNumber.Set() || b.Token.Set():
		nc, err := s.validate(ctx, m.ID, b.cardBody)
		var c Customer
		if err == nil {
			c, err = s.addCard(ctx, m.ID, r.PathValue("c"), nc)
		}
		respond(w, r, c, err, customerWire)
	case b.Amount.Set():
		t, err := s.pay(ctx, who, m, payment.KindSale, r.PathValue("c"), "", b.payBody, idempotency.Key(ctx))
		payment.Respond(w, r, t, err)
	default:
		httpapi.WriteError(w, r, fault.Invalid("card_number",
			"send card_number, card_expiry_month and card_expiry_year (or token) to store a card, or amount and currency to pay with the default card"))
	}
}

// payWith pays with a stored card: the one in the path, or the customer's default.
func (s *Service) payWith(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		who, m, err := payment.Who(ctx, s.merchants)
		var b payBody
		if err == nil {
			err = httpapi.DecodeJSON(r, &b)
		}
		var t payment.Transaction
		if err == nil {
			t, err = s.pay(ctx, who, m, kind, r.PathValue("c"), r.PathValue("card"), b, idempotency.Key(ctx))
		}
		payment.Respond(w, r, t, err)
	}
}

func (s *Service) patchCard(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var b cardUpdate
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var c Customer
	if err == nil {
		c, err = s.updateCard(r.Context(), who.MerchantID, r.PathValue("c"), r.PathValue("card"), b)
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) removeCard(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var c Customer
	if err == nil {
		c, err = s.deleteCard(r.Context(), who.MerchantID, r.PathValue("c"), r.PathValue("card"))
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var f CustomerFilter
	if err == nil {
		f, err = customerFilter(r.URL.Query())
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	s.writeCustomers(w, r, who.MerchantID, f)
}

// customerFilter reads the list's query parameters; each bad one is a 400 naming it.
func customerFilter(q url.Values) (CustomerFilter, error) {
	f := CustomerFilter{Limit: payment.DefaultLimit}
	var err error
	if f.Limit, f.Before, f.After, err = httpapi.PageParams(q, payment.DefaultLimit, payment.MaxLimit); err != nil {
		return f, err
	}
	f.Email, f.FirstName, f.LastName, f.Company = q.Get("email_address"), q.Get("first_name"), q.Get("last_name"), q.Get("company")
	if v := q.Get("with_subscription"); v != "" {
		with, ok := map[string]bool{"true": true, "false": false}[strings.ToLower(v)]
		if !ok {
			return f, fault.Invalid("with_subscription", "with_subscription must be true or false")
		}
		f.WithSubscription = &with
	}
	return f, nil
}

func (s *Service) writeCustomers(w http.ResponseWriter, r *http.Request, merchantID string, f CustomerFilter) {
	cs, err := s.listCustomers(r.Context(), merchantID, f)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	resp := httpapi.Page[wireCustomer]{Entities: make([]wireCustomer, len(cs))}
	for i, c := range cs {
		resp.Entities[i] = c.wire()
	}
	if n := len(cs); n > 0 {
		resp.SetCursors(cs[0].ID, cs[n-1].ID)
	}
	httpapi.WriteJSON(w, http.StatusOK, resp)
}

// planCustomers lists the customers with a current subscription to a plan.
func (s *Service) planCustomers(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var f CustomerFilter
	if err == nil {
		f, err = customerFilter(r.URL.Query())
	}
	if err == nil {
		err = s.db.Read(r.Context(), func(q store.Querier) error {
			p, err := plan.Get(r.Context(), q, who.MerchantID, r.PathValue("plan"))
			f.PlanID = p.ID
			return err
		})
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	s.writeCustomers(w, r, who.MerchantID, f)
}

func subscriptionWire(sub Subscription) any { return sub.Wire() }

func (s *Service) createSubscription(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b SubscriptionBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var c Customer
	if err == nil {
		c, err = s.subscribe(r.Context(), m, r.PathValue("c"), b)
	}
	respond(w, r, c, err, customerWire)
}

func (s *Service) getSubscription(w http.ResponseWriter, r *http.Request) {
	who, _, err := payment.Who(r.Context(), s.merchants)
	var sub Subscription
	if err == nil {
		err = s.db.Read(r.Context(), func(q store.Querier) error {
			sub, err = s.Subscription(r.Context(), q, who.MerchantID, r.PathValue("c"), r.PathValue("s"))
			return err
		})
	}
	respond(w, r, sub, err, subscriptionWire)
}

func (s *Service) patchSubscription(w http.ResponseWriter, r *http.Request) {
	_, m, err := payment.Who(r.Context(), s.merchants)
	var b SubscriptionBody
	if err == nil {
		err = httpapi.DecodeJSON(r, &b)
	}
	var sub Subscription
	if err == nil {
		sub, err = s.ChangeSubscription(r.Context(), m, r.PathValue("c"), r.PathValue("s"), b)
	}
	respond(w, r, sub, err, subscriptionWire)
}

package vault

import (
	"context"
	"errors"
	"strings"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// payBody is the body of a payment with a stored card (gateway-api.md, "Payment on a stored card").
type payBody struct {
	Amount   field.Value `json:"amount"`
	Currency field.Value `json:"currency"`
	TestMode field.Value `json:"test_mode"`
}

// pay charges a stored card of the customer — cardLookup, or the default card when it is "" — through
// the payments core: the same ledger, idempotency, invariants and audit as a card sent in the request.
// The transaction carries the customer's details and names the customer (CustomerLookupID).
func (s *Service) pay(ctx context.Context, who payment.Actor, m merchant.Merchant, kind, customerLookup, cardLookup string,
	b payBody, idempotencyKey string) (payment.Transaction, error) {
	amount, cur, err := payment.ChargeAmount(kind, b.Amount, b.Currency, m)
	if err != nil {
		return payment.Transaction{}, err
	}
	testMode, err := b.TestMode.Flag("test_mode")
	if err != nil {
		return payment.Transaction{}, err
	}
	c, cd, err := s.cardToCharge(ctx, m.ID, customerLookup, cardLookup)
	if err != nil {
		return payment.Transaction{}, err
	}
	return s.charge(ctx, who, kind, c, cd, amount, cur, testMode, payment.SourceEcommerce, idempotencyKey)
}

// ErrNoCard is returned when a subscription's card was deleted.
var ErrNoCard = errors.New("vault: the subscription has no card")

// ChargeSubscription charges one cycle of a subscription on its card: a RECURRING sale through the
// payments core, with the customer's details and the idempotency key the engine derives from the
// subscription, cycle and attempt.
func (s *Service) ChargeSubscription(ctx context.Context, sub Subscription, key string) (payment.Transaction, error) {
	if sub.CardID == 0 {
		return payment.Transaction{}, ErrNoCard
	}
	m, err := s.merchants.Get(ctx, sub.MerchantID)
	if err != nil {
		return payment.Transaction{}, err
	}
	var c Customer
	var cd Card
	err = s.db.Read(ctx, func(q store.Querier) error {
		var err error
		if c, err = scanCustomer(q.QueryRowContext(ctx, `SELECT `+customerColumns+` FROM customers WHERE id = $1`, sub.CustomerID)); err != nil {
			return err
		}
		cd, err = scanCard(q.QueryRowContext(ctx, `SELECT `+cardColumns+` FROM stored_cards WHERE id = $1`, sub.CardID))
		return err
	})
	if isNoRows(err) {
		return payment.Transaction{}, ErrNoCard
	}
	if err != nil {
		return payment.Transaction{}, err
	}
	who := payment.Actor{MerchantID: m.ID, RequestID: "billing", Profile: m.SimulatorProfile, Location: m.Location()}
	return s.charge(ctx, who, payment.KindSale, c, cd, sub.Amount, sub.Currency, false, payment.SourceRecurring, key)
}

// charge opens the card's number and charges it through the payments core, the transaction naming
// the customer, so that the customer's payments can be listed (payment.Filter.CustomerLookupID).
func (s *Service) charge(ctx context.Context, who payment.Actor, kind string, c Customer, cd Card, amount int64, cur money.Currency,
	testMode bool, source, idempotencyKey string) (payment.Transaction, error) {
	var sealed []byte
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT pan FROM stored_cards WHERE id = $1`, cd.ID).Scan(&sealed)
	})
	if err != nil {
		return payment.Transaction{}, err
	}
	pan, err := s.ring.Open(sealed, panAAD(cd.LookupID))
	if err != nil {
		return payment.Transaction{}, err
	}
	number, err := card.ParseNumber(string(pan))
	if err != nil {
		return payment.Transaction{}, err
	}
	d := c.Details
	return s.ledger.Charge(ctx, payment.Charge{Actor: who, Kind: kind, Amount: amount, Currency: cur, Card: number,
		Expiry: cd.Expiry, TestMode: testMode, Source: source, IdempotencyKey: idempotencyKey,
		StoredCard: true, Recurring: source == payment.SourceRecurring,
		Customer: payment.Customer{Email: d.Email, FirstName: d.FirstName, LastName: d.LastName, Company: d.Company,
			Telephone: d.Telephone, Address1: d.Address1, Address2: d.Address2, City: d.City, Province: d.Province,
			Country: d.Country, PostalCode: d.PostalCode, CustomID: d.CustomID, CustomerLookupID: c.LookupID}})
}

// cardToCharge reads the customer and the card to charge: cardLookup, or the default card.
func (s *Service) cardToCharge(ctx context.Context, merchantID, customerLookup, cardLookup string) (Customer, Card, error) {
	var c Customer
	var cd Card
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		if c, err = s.customer(ctx, q, merchantID, customerLookup); err != nil {
			return err
		}
		var ok bool
		switch {
		case cardLookup != "":
			if cd, ok = c.card(cardLookup); !ok {
				return fault.NotFound("No card %s for customer %s.", cardLookup, customerLookup)
			}
		case len(c.Cards) == 0:
			return fault.Conflict("no_stored_card", "Customer %s has no stored card to pay with.", customerLookup)
		default:
			if cd, ok = c.defaultCard(); !ok {
				cd = c.Cards[len(c.Cards)-1]
			}
		}
		return nil
	})
	return c, cd, err
}

// MethodFromCard makes a payment method of the merchant from a stored card of the customer
// customerLookup, so that an intent can be confirmed with it (an invoice charged on a vault
// customer's card). A card that is not the customer's, or a customer that is not the merchant's, is
// a 404. The method holds the number sealed, as any, until its confirmation consumes it; it carries
// the customer's contact details as billing details.
func (s *Service) MethodFromCard(ctx context.Context, merchantID, clientID, customerLookup, cardLookup string) (Method, error) {
	if cardLookup == "" {
		return Method{}, fault.Invalid("card_lookup_id", "card_lookup_id is required: the stored card to charge")
	}
	c, cd, err := s.cardToCharge(ctx, merchantID, customerLookup, cardLookup)
	if err != nil {
		return Method{}, err
	}
	var sealed []byte
	err = s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT pan FROM stored_cards WHERE id = $1`, cd.ID).Scan(&sealed)
	})
	if err != nil {
		return Method{}, err
	}
	pan, err := s.ring.Open(sealed, panAAD(cd.LookupID))
	if err != nil {
		return Method{}, err
	}
	number, err := card.ParseNumber(string(pan))
	if err != nil {
		return Method{}, err
	}
	d := c.Details
	name := strings.TrimSpace(d.FirstName + " " + d.LastName)
	return s.CreateMethod(ctx, merchantID, clientID, NewMethod{Number: number, Expiry: cd.Expiry, Billing: Billing{Name: name,
		Email: d.Email, Phone: d.Telephone, Line1: d.Address1, Line2: d.Address2, City: d.City, State: d.Province,
		PostalCode: d.PostalCode, Country: d.Country}})
}

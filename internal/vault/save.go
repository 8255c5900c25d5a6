package vault

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

// Storing a card that was given to pay (the dashboard's virtual terminal) or to be kept (the
// dashboard's card form), outside the customer service's API but under its rules: a customer's
// details are validated as customer creation validates them, a card as a stored card is (not
// expired; not already stored for the customer: duplicate_card), and the customer's first card
// becomes its default. A later card becomes the default only when asked (SaveTo.Default): the default
// is what a charge or a subscription without a card of its own bills.

// SaveTo names the customer a card is stored for: an existing one by its lookup id, or a new one to
// create with Details. Default makes the card the customer's default card, as is_default does in the
// customer service's API; without it only a customer's first card becomes its default.
type SaveTo struct {
	CustomerID string   `json:"customer_id,omitempty"`
	New        *Details `json:"new,omitempty"`
	Default    bool     `json:"default,omitempty"`
}

// ParseDetails validates a new customer's details given as text by their API names (email,
// first_name, last_name, …), with the rules of customer creation: email is required and must be an
// address, each field within its length. A fault names the field.
func ParseDetails(fields map[string]string) (Details, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return Details{}, err
	}
	var b detailsBody
	if err := httpapi.UnmarshalStrict(raw, &b, ""); err != nil {
		return Details{}, err
	}
	var d Details
	return d, b.apply(&d)
}

// FindCustomer finds the merchant's customer by its lookup id or else by e-mail (case-insensitive).
// None is a 404; an e-mail that several customers share is a 409 asking for the customer's id.
func (s *Service) FindCustomer(ctx context.Context, merchantID, idOrEmail string) (Customer, error) {
	idOrEmail = strings.TrimSpace(idOrEmail)
	if !strings.Contains(idOrEmail, "@") {
		return s.Get(ctx, merchantID, idOrEmail)
	}
	found, err := s.listCustomers(ctx, merchantID, CustomerFilter{Email: idOrEmail, Limit: 2})
	switch {
	case err != nil:
		return Customer{}, err
	case len(found) == 0:
		return Customer{}, fault.NotFound("No customer has the e-mail %s.", idOrEmail)
	case len(found) > 1:
		return Customer{}, fault.Conflict("ambiguous_customer", "Several customers have the e-mail %s; give the customer's id instead.", idOrEmail)
	}
	return found[0], nil
}

// SaveCard stores a card for the merchant's customer to (created first when to.New), and returns the
// customer and the card stored. The customer's first card becomes its default, and a later one only
// with to.Default.
func (s *Service) SaveCard(ctx context.Context, merchantID string, to SaveTo, number card.Number, expiry card.Expiry) (Customer, Card, error) {
	if err := s.current(expiry); err != nil {
		return Customer{}, Card{}, err
	}
	lookup := to.CustomerID
	if to.New != nil {
		c, err := s.createCustomer(ctx, merchantID, *to.New)
		if err != nil {
			return Customer{}, Card{}, err
		}
		lookup = c.LookupID
	}
	c, err := s.addCard(ctx, merchantID, lookup, newCard{number: number, expiry: expiry, isDefault: to.Default})
	if err != nil {
		return Customer{}, Card{}, err
	}
	return c, c.Cards[len(c.Cards)-1], nil // the cards in the order stored: the newest last
}

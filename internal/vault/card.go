package vault

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/store"
)

// Card is a stored card, without its number (which stays sealed until a payment needs it).
type Card struct {
	ID          int64
	LookupID    string
	CustomerID  int64
	Type        string
	Prefix      string // first six digits
	Suffix      string // last four
	Expiry      card.Expiry
	IsDefault   bool
	Description string
	CreatedAt   time.Time
}

const cardColumns = `id, lookup_id, customer_id, card_type, card_prefix, card_suffix, expiry_month, expiry_year, is_default,
	card_description, created_at`

func scanCard(s interface{ Scan(...any) error }) (Card, error) {
	var c Card
	var created int64
	err := s.Scan(&c.ID, &c.LookupID, &c.CustomerID, &c.Type, &c.Prefix, &c.Suffix, &c.Expiry.Month, &c.Expiry.Year,
		&c.IsDefault, &c.Description, &created)
	c.CreatedAt = time.UnixMilli(created)
	return c, err
}

// cardsOf reads the cards of the customers ids, oldest first.
func cardsOf(ctx context.Context, q store.Querier, ids []int64) ([]Card, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	in := make([]string, len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		in[i], args[i] = "$"+strconv.Itoa(i+1), id
	}
	rows, err := q.QueryContext(ctx, `SELECT `+cardColumns+` FROM stored_cards WHERE customer_id IN (`+strings.Join(in, ", ")+`) ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Card
	for rows.Next() {
		c, err := scanCard(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// cardBody is the body that stores a card: the card fields or a card token, and the card's settings.
type cardBody struct {
	CardNumber      field.Value `json:"card_number"`
	CardExpiryMonth field.Value `json:"card_expiry_month"`
	CardExpiryYear  field.Value `json:"card_expiry_year"`
	CVV2            field.Value `json:"cvv2"`
	Token           field.Value `json:"token"`
	IsDefault       field.Value `json:"is_default"`
	CardDescription field.Value `json:"card_description"`
}

// newCard is a validated card to store.
type newCard struct {
	number      card.Number
	expiry      card.Expiry
	isDefault   bool
	description string
	token       *cardenc.Token // the card token it came from, consumed when it is stored; nil for card fields
}

// validate reads the card to store. The CVV, when sent, is checked and dropped: it is never stored
// (PCI DSS 3.3.1). An expiry in the past is refused.
func (s *Service) validate(ctx context.Context, merchantID string, b cardBody) (newCard, error) {
	var nc newCard
	token, err := b.Token.Str("token")
	if err != nil {
		return nc, err
	}
	if token != "" {
		for _, f := range []struct {
			name string
			v    field.Value
		}{{"card_number", b.CardNumber}, {"card_expiry_month", b.CardExpiryMonth}, {"card_expiry_year", b.CardExpiryYear}, {"cvv2", b.CVV2}} {
			if f.v.Set() {
				return nc, fault.Invalid(f.name, "%s cannot be sent together with token: the token carries the card", f.name)
			}
		}
		c, err := s.tokens.Open(ctx, merchantID, token)
		if err != nil {
			return nc, cardenc.AsFault(err)
		}
		nc.number, nc.expiry, nc.token = c.Number, c.Expiry, &c.Token
	} else {
		if nc.number, nc.expiry, err = field.Card(b.CardNumber, b.CardExpiryMonth, b.CardExpiryYear); err != nil {
			return nc, err
		}
		if b.CVV2.Set() {
			if _, err := field.CVV(b.CVV2, card.BrandOf(nc.number)); err != nil {
				return nc, err
			}
		}
	}
	if err := s.current(nc.expiry); err != nil {
		return nc, err
	}
	if nc.isDefault, err = b.IsDefault.Flag("is_default"); err != nil {
		return nc, err
	}
	nc.description, err = b.CardDescription.Text("card_description", 200)
	return nc, err
}

// current refuses a card whose expiry is in the past: it cannot be stored.
func (s *Service) current(e card.Expiry) error {
	if e.Expired(s.now()) {
		return fault.Invalid("card_expiry_year", "the card expired at the end of %s", e)
	}
	return nil
}

// addCard stores a card for the customer and returns the customer. The customer's first card becomes
// its default; a card stored with is_default takes the default over, in the same transaction. A card
// from a token consumes the token in that transaction; a token used before is the same 400 as any
// unusable token.
func (s *Service) addCard(ctx context.Context, merchantID, customerLookup string, nc newCard) (Customer, error) {
	var c Customer
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = s.lockCustomer(ctx, tx, merchantID, customerLookup); err != nil {
			return err
		}
		// Consumed first, so that a used token is refused as such whatever else is wrong; a refusal
		// below rolls the consumption back with the rest.
		if nc.token != nil {
			if err := nc.token.Consume(ctx, tx); err != nil {
				return err
			}
		}
		fp := s.fingerprint(nc.number.Digits())
		var dup int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM stored_cards WHERE customer_id = $1 AND fingerprint = $2`, c.ID, fp).Scan(&dup); err != nil {
			return err
		}
		if dup > 0 {
			return duplicateCard()
		}
		makeDefault := nc.isDefault || len(c.Cards) == 0
		if makeDefault {
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET is_default = FALSE WHERE customer_id = $1 AND is_default`, c.ID); err != nil {
				return err
			}
		}
		lookup := newLookupID()
		now := s.now().UnixMilli()
		_, err = tx.ExecContext(ctx, `INSERT INTO stored_cards (lookup_id, customer_id, pan, fingerprint, card_type, card_prefix,
			card_suffix, expiry_month, expiry_year, is_default, card_description, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
			lookup, c.ID, s.ring.Seal([]byte(nc.number.Digits()), panAAD(lookup)), fp, string(card.BrandOf(nc.number)),
			nc.number.First6(), nc.number.Last4(), nc.expiry.Month, nc.expiry.Year, makeDefault, nc.description, now)
		if store.IsUniqueViolation(err) {
			return duplicateCard() // the same number, stored by a concurrent request
		}
		if err != nil {
			return err
		}
		if err := audit.Change(ctx, tx, merchantID, "card.add", cardResource(customerLookup, lookup), s.now()); err != nil {
			return err
		}
		return s.reloadCards(ctx, tx, merchantID, &c)
	})
	return c, cardenc.AsFault(err)
}

// cardResource names a stored card in the audit log.
func cardResource(customerLookup, cardLookup string) string {
	return "customer/" + customerLookup + "/card/" + cardLookup
}

func duplicateCard() error {
	return fault.Conflict("duplicate_card", "This card is already stored for this customer.")
}

// cardUpdate is the body of a card update.
type cardUpdate struct {
	IsDefault       field.Value `json:"is_default"`
	CardDescription field.Value `json:"card_description"`
	CardExpiryMonth field.Value `json:"card_expiry_month"`
	CardExpiryYear  field.Value `json:"card_expiry_year"`
}

// updateCard changes a card's default flag, description or expiry, and returns the customer. is_default
// true makes the card the customer's default (the old default is unset in the same transaction);
// false is ignored: a customer with cards always has a default.
func (s *Service) updateCard(ctx context.Context, merchantID, customerLookup, cardLookup string, b cardUpdate) (Customer, error) {
	makeDefault, err := b.IsDefault.Flag("is_default")
	if err != nil {
		return Customer{}, err
	}
	var desc *string
	if b.CardDescription.Set() {
		d, err := b.CardDescription.Text("card_description", 200)
		if err != nil {
			return Customer{}, err
		}
		desc = &d
	}
	var exp *card.Expiry
	if b.CardExpiryMonth.Set() || b.CardExpiryYear.Set() {
		e, err := field.Expiry(b.CardExpiryMonth, b.CardExpiryYear)
		if err != nil {
			return Customer{}, err
		}
		if err := s.current(e); err != nil {
			return Customer{}, err
		}
		exp = &e
	}
	var c Customer
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = s.lockCustomer(ctx, tx, merchantID, customerLookup); err != nil {
			return err
		}
		cd, ok := c.card(cardLookup)
		if !ok {
			return fault.NotFound("No card %s for customer %s.", cardLookup, customerLookup)
		}
		now := s.now().UnixMilli()
		if makeDefault && !cd.IsDefault {
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET is_default = FALSE WHERE customer_id = $1 AND is_default`, c.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET is_default = TRUE, updated_at = $2 WHERE id = $1`, cd.ID, now); err != nil {
				return err
			}
		}
		if desc != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET card_description = $2, updated_at = $3 WHERE id = $1`, cd.ID, *desc, now); err != nil {
				return err
			}
		}
		if exp != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET expiry_month = $2, expiry_year = $3, updated_at = $4 WHERE id = $1`,
				cd.ID, exp.Month, exp.Year, now); err != nil {
				return err
			}
		}
		if err := audit.Change(ctx, tx, merchantID, "card.update", cardResource(customerLookup, cardLookup), s.now()); err != nil {
			return err
		}
		return s.reloadCards(ctx, tx, merchantID, &c)
	})
	return c, err
}

// deleteCard removes a card and returns the customer. When it was the default, the most recently
// added remaining card becomes the default.
func (s *Service) deleteCard(ctx context.Context, merchantID, customerLookup, cardLookup string) (Customer, error) {
	var c Customer
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = s.lockCustomer(ctx, tx, merchantID, customerLookup); err != nil {
			return err
		}
		cd, ok := c.card(cardLookup)
		if !ok {
			return fault.NotFound("No card %s for customer %s.", cardLookup, customerLookup)
		}
		for _, sub := range c.Subscriptions {
			if !sub.Final() && sub.CardID == cd.ID {
				return fault.Conflict("card_in_use", "Card %s bills subscription %s; move the subscription to another card first.",
					cardLookup, sub.LookupID)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM stored_cards WHERE id = $1`, cd.ID); err != nil {
			return err
		}
		if cd.IsDefault {
			if _, err := tx.ExecContext(ctx, `UPDATE stored_cards SET is_default = TRUE
				WHERE id = (SELECT MAX(id) FROM stored_cards WHERE customer_id = $1)`, c.ID); err != nil {
				return err
			}
		}
		if err := audit.Change(ctx, tx, merchantID, "card.delete", cardResource(customerLookup, cardLookup), s.now()); err != nil {
			return err
		}
		return s.reloadCards(ctx, tx, merchantID, &c)
	})
	return c, err
}

// reloadCards reads the customer's cards again after a change to them in tx, and records the change's
// events there.
func (s *Service) reloadCards(ctx context.Context, tx *store.Tx, merchantID string, c *Customer) error {
	before := c.Cards
	var err error
	if c.Cards, err = cardsOf(ctx, tx, []int64{c.ID}); err != nil {
		return err
	}
	return recordCardChanges(ctx, tx, merchantID, c.LookupID, before, c.Cards, s.now())
}

// lockCustomer takes the customer's row lock for the rest of tx and then reads the customer with its
// cards, so that concurrent changes to one customer's cards happen one after another: two cards
// stored at once as default cannot both unset the old default and then both claim it.
func (s *Service) lockCustomer(ctx context.Context, tx *store.Tx, merchantID, lookupID string) (Customer, error) {
	r, err := tx.ExecContext(ctx, `UPDATE customers SET updated_at = $3 WHERE merchant_id = $1 AND lookup_id = $2`,
		merchantID, lookupID, s.now().UnixMilli())
	if err != nil {
		return Customer{}, err
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return Customer{}, fault.NotFound("No customer %s.", lookupID)
	}
	return s.customer(ctx, tx, merchantID, lookupID)
}

// card finds one of the customer's cards.
func (c Customer) card(lookupID string) (Card, bool) {
	for _, cd := range c.Cards {
		if cd.LookupID == lookupID {
			return cd, true
		}
	}
	return Card{}, false
}

// defaultCard is the customer's default card.
func (c Customer) defaultCard() (Card, bool) {
	for _, cd := range c.Cards {
		if cd.IsDefault {
			return cd, true
		}
	}
	return Card{}, false
}

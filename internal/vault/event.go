package vault

import (
	"context"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
)

// The vault's events: each is written in the same database transaction as the change it reports (no
// event without its change, no change without its event), with the object as the API would show it at
// that moment. A customer's events carry the customer as GET
// /customer-service/customer/{c} shows it (for customer.deleted, as it showed it last). A card and a
// subscription live under their customer's path; their events carry them as the API shows them
// there, with the customer's lookup id beside, so that a receiver knows whose they are and where to
// read them.

// cardObject is a stored card as its events show it.
type cardObject struct {
	wireCard
	CustomerLookupID string `json:"customer_lookup_id"`
}

// subscriptionObject is a subscription as its events show it.
type subscriptionObject struct {
	WireSubscription
	CustomerLookupID string `json:"customer_lookup_id"`
}

// RecordSubscription records the event typ about sub, as it stands after the change, in tx: the
// transaction of the change.
func RecordSubscription(ctx context.Context, tx *store.Tx, typ string, sub Subscription, at time.Time) error {
	return event.Record(ctx, tx, sub.MerchantID, typ, subscriptionObject{sub.Wire(), sub.CustomerLookupID}, at)
}

// recordCardChanges records, in tx, the events of a change to a customer's cards from before to
// after: card.deleted for each card gone (as it was), card.added for each new one, and card.updated
// for each that the API shows otherwise — including both cards of a change of default, the one made
// default and the one that stopped being it. A change that leaves every card as it was records none.
func recordCardChanges(ctx context.Context, tx *store.Tx, merchantID, customerLookup string, before, after []Card, at time.Time) error {
	find := func(cards []Card, id int64) (Card, bool) {
		for _, cd := range cards {
			if cd.ID == id {
				return cd, true
			}
		}
		return Card{}, false
	}
	record := func(typ string, cd Card) error {
		return event.Record(ctx, tx, merchantID, typ, cardObject{cd.wire(), customerLookup}, at)
	}
	for _, cd := range before {
		if _, ok := find(after, cd.ID); !ok {
			if err := record(event.CardDeleted, cd); err != nil {
				return err
			}
		}
	}
	for _, cd := range after {
		if _, ok := find(before, cd.ID); !ok {
			if err := record(event.CardAdded, cd); err != nil {
				return err
			}
		}
	}
	for _, cd := range after {
		if was, ok := find(before, cd.ID); ok && was.wire() != cd.wire() {
			if err := record(event.CardUpdated, cd); err != nil {
				return err
			}
		}
	}
	return nil
}

package vault_test

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/vault"
)

// cardOf is the card of lookup id l among the customer's cards in r ("" when it has none).
func cardOf(r servertest.Response, l string) map[string]any {
	for _, c := range cards(r) {
		if c["lookup_id"] == l {
			return c
		}
	}
	return nil
}

// Each change to a customer or its cards records its event, with the object as the API shows it then
// (a deleted one as the API showed it last); a refused change, or one that changes nothing, records
// none; another merchant's change records nothing for this one.
func TestCustomerAndCardEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		other := srv.NewMerchant(t)
		log := &eventtest.Log{DB: db, MerchantID: m.ID}
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com", "first_name": "Ada"}).Str("lookup_id")
		path := "/customer-service/customer/" + c
		get := func() servertest.Response { return m.Do(t, "GET", path, nil) }
		eventtest.Shows(t, log.Next(t, event.CustomerCreated)[0], get().Body)

		m.Do(t, "PUT", path, map[string]any{"city": "Toronto"})
		eventtest.Shows(t, log.Next(t, event.CustomerUpdated)[0], get().Body)
		m.Do(t, "PUT", path, map[string]any{"city": "Toronto"})  // as it was
		m.Do(t, "PUT", path, map[string]any{"email": "nope"})    // 400
		other.Do(t, "PUT", path, map[string]any{"city": "Oslo"}) // 404
		log.Next(t)

		visa := cards(addCard(t, m, c, cardBody(cardtest.Visa)))[0]["lookup_id"].(string)
		eventtest.Shows(t, log.Next(t, event.CardAdded)[0], cardOf(get(), visa), "customer_lookup_id", c)
		// A card stored as the default takes it over: the old default is updated too.
		r := addCard(t, m, c, cardBody(cardtest.Mastercard, "is_default", true))
		mc := cards(r)[1]["lookup_id"].(string)
		es := log.Next(t, event.CardAdded, event.CardUpdated)
		eventtest.Shows(t, es[0], cardOf(get(), mc), "customer_lookup_id", c)
		eventtest.Shows(t, es[1], cardOf(get(), visa), "customer_lookup_id", c)
		if cardOf(get(), visa)["is_default"] != false {
			t.Fatalf("the old default: %v", cardOf(get(), visa))
		}
		addCard(t, m, c, cardBody(cardtest.Visa))                              // 409 duplicate_card
		addCard(t, m, c, cardBody(cardtest.Discover, "card_expiry_month", 13)) // 400
		addCard(t, other, c, cardBody(cardtest.Discover))                      // 404
		log.Next(t)

		// Made default: both cards change.
		m.Do(t, "PATCH", path+"/card/"+visa, map[string]any{"is_default": true})
		es = log.Next(t, event.CardUpdated, event.CardUpdated)
		eventtest.Shows(t, es[0], cardOf(get(), visa), "customer_lookup_id", c)
		eventtest.Shows(t, es[1], cardOf(get(), mc), "customer_lookup_id", c)
		m.Do(t, "PATCH", path+"/card/"+mc, map[string]any{"card_description": "work", "card_expiry_month": 3, "card_expiry_year": 2031})
		eventtest.Shows(t, log.Next(t, event.CardUpdated)[0], cardOf(get(), mc), "customer_lookup_id", c)
		m.Do(t, "PATCH", path+"/card/"+mc, map[string]any{"card_description": "work"}) // as it was
		m.Do(t, "PATCH", path+"/card/nosuchcard", map[string]any{"card_description": "x"})
		log.Next(t)

		// Deleting the default promotes the other card.
		before := get()
		m.Do(t, "DELETE", path+"/card/"+visa, nil)
		es = log.Next(t, event.CardDeleted, event.CardUpdated)
		eventtest.Shows(t, es[0], cardOf(before, visa), "customer_lookup_id", c)
		eventtest.Shows(t, es[1], cardOf(get(), mc), "customer_lookup_id", c)

		before = get()
		other.Do(t, "DELETE", path, nil) // 404
		if d := m.Do(t, "DELETE", path, nil); d.Status != 200 {
			t.Fatalf("delete: %d %s", d.Status, d.Raw)
		}
		// The customer as it was, with its card: no card.deleted of its own.
		eventtest.Shows(t, log.Next(t, event.CustomerDeleted)[0], before.Body)
		m.Do(t, "DELETE", path, nil) // 404 now
		log.Next(t)
		(&eventtest.Log{DB: db, MerchantID: other.ID}).Next(t)
	})
}

// A card stored outside the customer service — from the dashboard's terminal or card form, for a new
// customer or an existing one — records the same events.
func TestSavedCardEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		log := &eventtest.Log{DB: db, MerchantID: m.ID}
		n, err := card.ParseNumber(cardtest.Visa)
		if err != nil {
			t.Fatal(err)
		}
		exp := card.Expiry{Month: 12, Year: 2099}
		c, cd, err := srv.Vault().SaveCard(context.Background(), m.ID, vault.SaveTo{New: &vault.Details{Email: "grace@example.com"}}, n, exp)
		if err != nil {
			t.Fatal(err)
		}
		es := log.Next(t, event.CustomerCreated, event.CardAdded)
		get := m.Do(t, "GET", "/customer-service/customer/"+c.LookupID, nil)
		eventtest.Shows(t, es[1], cardOf(get, cd.LookupID), "customer_lookup_id", c.LookupID)
		if d := eventtest.Data(t, es[0]); d["lookup_id"] != c.LookupID || d["email"] != "grace@example.com" || len(d["cards"].([]any)) != 0 {
			t.Errorf("customer.created of a saved card: %s", es[0].Data)
		}
		m2, err := card.ParseNumber(cardtest.Mastercard)
		if err != nil {
			t.Fatal(err)
		}
		if _, cd, err = srv.Vault().SaveCard(context.Background(), m.ID, vault.SaveTo{CustomerID: c.LookupID}, m2, exp); err != nil {
			t.Fatal(err)
		}
		get = m.Do(t, "GET", "/customer-service/customer/"+c.LookupID, nil)
		eventtest.Shows(t, log.Next(t, event.CardAdded)[0], cardOf(get, cd.LookupID), "customer_lookup_id", c.LookupID)
	})
}

// A change and its event are one transaction: when the event cannot be recorded, the change is not
// made either.
func TestVaultEventsShareTheChangesTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		log := &eventtest.Log{DB: db, MerchantID: m.ID}
		allow := eventtest.Refuse(t, db, "customer.%")
		if r := m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "ada@example.com"}); r.Status != 500 {
			t.Fatalf("create while its event is refused: %d %s", r.Status, r.Raw)
		}
		if l := m.Do(t, "GET", "/customer-service/customer", nil); len(l.Body["entities"].([]any)) != 0 {
			t.Fatalf("a customer was created without its event: %s", l.Raw)
		}
		allow()
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		log.Next(t, event.CustomerCreated)

		eventtest.Refuse(t, db, "card.%")
		if r := addCard(t, m, c, cardBody(cardtest.Visa)); r.Status != 500 {
			t.Fatalf("add a card while its event is refused: %d %s", r.Status, r.Raw)
		}
		if r := m.Do(t, "GET", "/customer-service/customer/"+c, nil); len(cards(r)) != 0 {
			t.Fatalf("a card was stored without its event: %s", r.Raw)
		}
		log.Next(t)
	})
}

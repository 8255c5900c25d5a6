package webhook_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A sale's outcome is its event: with an endpoint subscribed to every type, a sale writes no row of
// events and no entry of webhook_queue, and its event is still listed, read by its id and delivered.
// Another merchant's key does not read it.
func TestSaleWritesNoEventRow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{NoBillingEngine: true})
		s := newShop(t, srv, checkout.AllPermissions)
		other := newShop(t, srv, checkout.AllPermissions)
		s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://hooks.example.com/all", "enabled_events": []string{"*"}})
		sold := s.gateway(t, "sale", sale(cardtest.Visa))
		for _, table := range []string{"events", "webhook_queue"} {
			var n int
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("a sale wrote %d rows of %s", n, table)
			}
		}
		listed := s.events(t, "limit=10")
		wantEvents(t, listed, []want{{event.TransactionApproved, sold.Body}})
		id := listed[0]["id"].(string)
		if got := s.v1(t, "GET", "/v1/events/"+id, nil); got.Str("id") != id || got.Str("type") != event.TransactionApproved {
			t.Errorf("GET /v1/events/%s: %s", id, got.Raw)
		}
		if r := srv.Do(t, "GET", "/v1/events/"+id, nil, other.key...); r.Status != 404 {
			t.Errorf("another merchant's GET /v1/events/%s: %d %s", id, r.Status, r.Raw)
		}
		// One character changed in the time part: the id of no event.
		forged := id[:4] + "2" + id[5:]
		if r := srv.Do(t, "GET", "/v1/events/"+forged, nil, s.key...); r.Status != 404 {
			t.Errorf("GET /v1/events/%s: %d %s", forged, r.Status, r.Raw)
		}
	})
}

// The events API lists the events of the events table (customers) and those derived from the ledger
// (sales) as one list, newest first in the order they were recorded, all at the same millisecond;
// paging through it by starting_after, then back by ending_before, with any page size, shows every
// event once, in that order.
func TestEventsPagedAcrossBothSources(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now().Truncate(time.Second))
		srv := servertest.Start(t, db, server.Config{Now: clk.Now, NoBillingEngine: true})
		s := newShop(t, srv, checkout.AllPermissions)
		var types []string
		for i := range 7 {
			if i%3 == 1 {
				r := s.m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "c" + strconv.Itoa(i) + "@example.com"})
				if r.Status != 200 {
					t.Fatalf("customer: %d %s", r.Status, r.Raw)
				}
				types = append(types, event.CustomerCreated)
				continue
			}
			card := cardtest.Visa
			typ := event.TransactionApproved
			if i%2 == 1 {
				card, typ = cardtest.Declined, event.TransactionDeclined
			}
			s.gateway(t, "sale", sale(card))
			types = append(types, typ)
		}
		slices.Reverse(types) // newest first
		all := s.events(t, "limit=100")
		slices.Reverse(all)
		var ids, got []string
		for _, e := range all {
			ids, got = append(ids, e["id"].(string)), append(got, e["type"].(string))
		}
		if !slices.Equal(got, types) {
			t.Fatalf("events %v; want %v", got, types)
		}
		for size := 1; size <= 4; size++ {
			var forward []string
			cursor := ""
			for {
				q := "limit=" + strconv.Itoa(size)
				if cursor != "" {
					q += "&starting_after=" + cursor
				}
				r := s.v1(t, "GET", "/v1/events?"+q, nil)
				data := r.Body["data"].([]any)
				for _, e := range data {
					forward = append(forward, e.(map[string]any)["id"].(string))
				}
				if !r.Body["has_more"].(bool) {
					break
				}
				cursor = forward[len(forward)-1]
			}
			if !slices.Equal(forward, ids) {
				t.Fatalf("pages of %d forward: %v; want %v", size, forward, ids)
			}
			var backward []string
			cursor = ids[len(ids)-1]
			for {
				r := s.v1(t, "GET", "/v1/events?limit="+strconv.Itoa(size)+"&ending_before="+cursor, nil)
				var page []string
				for _, e := range r.Body["data"].([]any) {
					page = append(page, e.(map[string]any)["id"].(string))
				}
				backward = append(page, backward...)
				if !r.Body["has_more"].(bool) {
					break
				}
				cursor = page[0]
			}
			if want := ids[:len(ids)-1]; !slices.Equal(backward, want) {
				t.Fatalf("pages of %d backward: %v; want %v", size, backward, want)
			}
		}
		var wantTyped []string
		for _, typ := range types {
			if typ != event.TransactionDeclined {
				wantTyped = append(wantTyped, typ)
			}
		}
		var typed []string
		for _, e := range s.events(t, "limit=100&type=transaction.approved,customer.created") {
			typed = append([]string{e["type"].(string)}, typed...)
		}
		if !slices.Equal(typed, wantTyped) {
			t.Errorf("type filter across both sources: %v; want %v", typed, wantTyped)
		}
	})
}

// An endpoint subscribed to transaction.approved is sent the approved sales' events only; one
// subscribed to every type is sent the declined one too. Each is the event the events API shows.
func TestDerivedEventsBySubscription(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{NoBillingEngine: true, WebhooksAllowPrivate: true})
		s := newShop(t, srv, checkout.AllPermissions)
		h := newHooks(t)
		for path, enabled := range map[string][]string{"/all": {"*"}, "/approved": {event.TransactionApproved}} {
			r := s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": h.srv.URL + path, "enabled_events": enabled})
			h.mu.Lock()
			h.secrets[path] = r.Str("secret")
			h.mu.Unlock()
		}
		s.gateway(t, "sale", sale(cardtest.Visa))
		s.gateway(t, "sale", sale(cardtest.Declined))
		s.gateway(t, "sale", sale(cardtest.Mastercard))
		byType := map[string][]string{}
		events := map[string]map[string]any{}
		for _, e := range s.events(t, "limit=10") {
			byType[e["type"].(string)] = append(byType[e["type"].(string)], e["id"].(string))
			events[e["id"].(string)] = e
		}
		for path, want := range map[string][]string{"/all": append(slices.Clone(byType[event.TransactionApproved]), byType[event.TransactionDeclined]...),
			"/approved": byType[event.TransactionApproved]} {
			h.expect(t, path, want, events)
		}
	})
}

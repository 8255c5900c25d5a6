package invoice_test

import (
	"maps"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// shows fails t unless the invoice event e shows the invoice as the API answered it (body) but for
// payment_url and pdf_url, which no event carries: their key is a bearer secret, and events are kept,
// and delivered, in clear.
func shows(t *testing.T, e event.Event, body map[string]any) {
	t.Helper()
	want := maps.Clone(body)
	for _, link := range []string{"payment_url", "pdf_url"} {
		if want[link] == nil {
			t.Fatalf("the API's answer has no %s: %v", link, body)
		}
		delete(want, link)
	}
	eventtest.Shows(t, e, want)
}

// Each change of an invoice through the API records its event, with the invoice as the API answered
// the change but for its links (a deleted draft as GET showed it last): created, updated, sent (each sending), canceled,
// deleted; created then sent for a creation with send_email. A refused change, or an update that
// leaves the invoice as the API shows it, records none.
func TestInvoiceEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := newClocked(t, db, time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		log := c.log
		items := []map[string]any{{"description": "Consulting day", "unit_price": "100.00"}}
		r := c.must(t, "POST", base, map[string]any{"invoice_number": "E-1", "due_date": "2026-12-01", "customer_email": "e@example.com", "items": items})
		id := r.Str("lookup_id")
		shows(t, log.next(t, event.InvoiceCreated)[0], r.Body)
		c.clock.Advance(time.Minute)
		r = c.must(t, "PUT", base+"/"+id, map[string]any{"notes": "Thank you", "reminder_days": []int{0}})
		shows(t, log.next(t, event.InvoiceUpdated)[0], r.Body)
		c.clock.Advance(time.Minute)
		c.must(t, "PUT", base+"/"+id, map[string]any{"notes": "Thank you"})             // as it is
		c.do(t, "PUT", base+"/"+id, map[string]any{"status": "PAID"})                   // 400
		c.do(t, "POST", base, map[string]any{"invoice_number": "E-1", "items": items})  // 409: the number is taken
		c.srv.NewMerchant(t).Do(t, "PUT", base+"/"+id, map[string]any{"notes": "Mine"}) // 404
		log.next(t)
		for range 2 { // sent, then sent again by hand
			c.clock.Advance(time.Minute)
			r = c.must(t, "POST", base+"/"+id+"/send", map[string]any{})
			shows(t, log.next(t, event.InvoiceSent)[0], r.Body)
		}
		c.do(t, "DELETE", base+"/"+id, nil) // 409: sent
		log.next(t)
		c.clock.Advance(time.Minute)
		r = c.must(t, "PUT", base+"/"+id, map[string]any{"status": "CANCELLED"})
		shows(t, log.next(t, event.InvoiceCanceled)[0], r.Body)
		c.do(t, "POST", base+"/"+id+"/send", map[string]any{}) // 409: cancelled
		log.next(t)

		r = c.must(t, "POST", base, map[string]any{"invoice_number": "E-2", "customer_email": "e@example.com", "send_email": true, "items": items})
		es := log.next(t, event.InvoiceCreated, event.InvoiceSent)
		shows(t, es[1], r.Body)
		if d := eventtest.Data(t, es[0]); d["status"] != "DRAFT" || d["lookup_id"] != r.Str("lookup_id") {
			t.Fatalf("created, before it was sent: %v", d)
		}

		draft := c.must(t, "POST", base, map[string]any{"invoice_number": "E-3", "items": items}).Str("lookup_id")
		log.next(t, event.InvoiceCreated)
		before := c.get(t, draft)
		c.must(t, "DELETE", base+"/"+draft, nil)
		shows(t, log.next(t, event.InvoiceDeleted)[0], before.Body)
	})
}

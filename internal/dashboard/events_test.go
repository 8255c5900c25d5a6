package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// eventsPath is Developers → Events.
const eventsPath = "/dashboard/events"

// writeEvents records an event of the merchant per type in types, a second apart in that order
// (the last the newest), each about an object whose id is its index (obj_0, obj_1…), and returns
// their ids; payload, when not nil, is the data of the last one as it is stored, unencoded.
func writeEvents(t *testing.T, db *store.DB, merchantID string, payload json.RawMessage, types ...string) []string {
	t.Helper()
	ctx := context.Background()
	at := time.Now().Add(-time.Hour)
	var ids []string
	if err := db.Write(ctx, func(tx *store.Tx) error {
		for i, typ := range types {
			e, err := event.New(merchantID, typ, map[string]string{"id": "obj_" + strconv.Itoa(i)}, at.Add(time.Duration(i)*time.Second))
			if err != nil {
				return err
			}
			if payload != nil && i == len(types)-1 {
				e.Data = payload
			}
			if err := e.Write(ctx, tx); err != nil {
				return err
			}
			ids = append(ids, e.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// listedEvents are the ids of the events a list page shows, in its order.
func listedEvents(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<a href="/dashboard/events/(evt_[^"]+)">`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// Developers → Events on both backends: with no event, the empty state (a link to Webhooks for a
// manager); then the merchant's events newest first, 25 a page, the next page through the list's
// Older link and back through Newer; filtered by type behind the Filter disclosure, with its chip; an
// event's page with its type, object and payload, escaped; a type that is none a 400 naming the
// field, a cursor no page gave a 400 too; another merchant's event and an unknown id the 404 page;
// sales staff, outside readers, refused with 403 while reporting reads.
func TestEventsPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		b := s.browser(t)
		b.signIn("owner@maple.example")

		rb := s.browser(t)
		rb.signIn("reporting@maple.example")

		resp, body := b.get(eventsPath)
		wantStatus(t, "the list without events", resp, body, http.StatusOK)
		if sec := emptyState(body, "events-empty"); !strings.Contains(sec, "No events yet") || !strings.Contains(sec, `href="`+webhooksPath+`"`) {
			t.Fatalf("the owner's empty list: %s", body)
		}
		resp, body = rb.get(eventsPath)
		wantStatus(t, "reporting's list without events", resp, body, http.StatusOK)
		if sec := emptyState(body, "events-empty"); !strings.Contains(sec, "No events yet") || strings.Contains(sec, "<a ") {
			t.Fatalf("reporting's empty list, which offers no action: %s", body)
		}

		// 26 customer events, then the newest, a plan's, whose payload would close the page's <pre>.
		const hostile = `{"id":"plan_1","name":"</pre><script>alert(1)</script>"}`
		types := append(slices.Repeat([]string{event.CustomerCreated}, 26), event.PlanCreated)
		ids := writeEvents(t, db, s.merchantID, json.RawMessage(hostile), types...)
		newest := slices.Clone(ids)
		slices.Reverse(newest)

		resp, body = b.get(eventsPath)
		wantStatus(t, "the list", resp, body, http.StatusOK)
		if got := listedEvents(body); !slices.Equal(got, newest[:25]) {
			t.Fatalf("the first page lists %q, want the 25 newest, newest first: %q", got, newest[:25])
		}
		if !strings.Contains(body, `<details class="filter">`) || !strings.Contains(body, `<option>`+event.InvoicePaid+`</option>`) {
			t.Fatalf("no type filter behind the Filter disclosure: %s", body)
		}
		older := regexp.MustCompile(`<a href="([^"]+)" rel="next">Older</a>`).FindStringSubmatch(body)
		if older == nil || strings.Contains(body, `rel="prev"`) {
			t.Fatalf("the first page's pager: %s", body)
		}
		resp, body = b.get(eventsPath + strings.ReplaceAll(older[1], "&amp;", "&"))
		wantStatus(t, "the next page", resp, body, http.StatusOK)
		if got := listedEvents(body); !slices.Equal(got, newest[25:]) {
			t.Fatalf("the next page lists %q, want %q", got, newest[25:])
		}
		newer := regexp.MustCompile(`<a href="([^"]+)" rel="prev">Newer</a>`).FindStringSubmatch(body)
		if newer == nil || strings.Contains(body, `rel="next"`) {
			t.Fatalf("the last page's pager: %s", body)
		}
		resp, body = b.get(eventsPath + strings.ReplaceAll(newer[1], "&amp;", "&"))
		wantStatus(t, "back to the first page", resp, body, http.StatusOK)
		if got := listedEvents(body); !slices.Equal(got, newest[:25]) {
			t.Fatalf("Newer from the last page lists %q, want %q", got, newest[:25])
		}

		resp, body = b.get(eventsPath + "?type=" + event.PlanCreated)
		wantStatus(t, "the type filter", resp, body, http.StatusOK)
		if got := listedEvents(body); !slices.Equal(got, newest[:1]) {
			t.Fatalf("plan.created lists %q, want %q", got, newest[:1])
		}
		if !strings.Contains(body, `<option selected>`+event.PlanCreated+`</option>`) ||
			!regexp.MustCompile(`<li>Type: plan\.created <a href="/dashboard/events">`).MatchString(body) {
			t.Fatalf("the filter is not chosen, or its chip does not remove it: %s", body)
		}
		resp, body = b.get(eventsPath + "?type=" + event.SubscriptionExpired)
		wantStatus(t, "a filter of no event", resp, body, http.StatusOK)
		if !strings.Contains(body, "Nothing matches these filters") {
			t.Fatalf("a filter of no event: %s", body)
		}
		resp, body = b.get(eventsPath + "?type=customer.exploded")
		wantStatus(t, "an unknown type", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, "Type must be an event type") {
			t.Fatalf("an unknown type's refusal does not name the field: %s", body)
		}
		resp, body = b.get(eventsPath + "?after=evt_none")
		wantStatus(t, "a cursor no page gave", resp, body, http.StatusBadRequest)

		resp, body = b.get(eventsPath + "/" + newest[0])
		wantStatus(t, "the event's page", resp, body, http.StatusOK)
		if !strings.Contains(body, `<dd id="event-type"><code>plan.created</code></dd>`) ||
			!strings.Contains(body, `<dd id="event-object"><code>plan_1</code></dd>`) {
			t.Fatalf("the event's type or object: %s", body)
		}
		if strings.Contains(body, "<script>alert") ||
			!strings.Contains(body, `&#34;name&#34;: &#34;&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;&#34;`) {
			t.Fatalf("the payload is not shown indented and escaped: %s", body)
		}

		other := s.srv.NewMerchant(t)
		theirs := writeEvents(t, db, other.ID, json.RawMessage(`{"id":"theirs","secret":"their own"}`), event.CustomerCreated)[0]
		for _, id := range []string{theirs, "evt_none"} {
			resp, body = b.get(eventsPath + "/" + id)
			wantStatus(t, "the event "+id, resp, body, http.StatusNotFound)
			if !strings.Contains(body, "Page not found") || strings.Contains(body, "their own") {
				t.Fatalf("the event %s: %s", id, body)
			}
		}
		if _, body = b.get(eventsPath); slices.Contains(listedEvents(body), theirs) {
			t.Fatalf("the list shows another merchant's event: %s", body)
		}

		sb := s.browser(t)
		sb.signIn("sales@maple.example")
		for _, p := range []string{eventsPath, eventsPath + "/" + newest[0]} {
			resp, body = sb.get(p)
			wantStatus(t, "sales GET "+p, resp, body, http.StatusForbidden)
			if strings.Contains(body, newest[0]) {
				t.Fatalf("sales' refused %s shows an event: %s", p, body)
			}
		}
		resp, body = rb.get(eventsPath + "/" + newest[0])
		wantStatus(t, "reporting reads an event", resp, body, http.StatusOK)
	})
}

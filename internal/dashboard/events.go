package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/webhook"
)

// Developers → Events: the events Kassa recorded for the merchant, the very ones GET /v1/events
// serves (webhook.ListEvents and webhook.GetEvent: the events table and the events derived from the
// ledger and from payment intents, in the merchant's order of events), newest first, a page at a
// time, filtered by type; and each event with its payload as it was sent. Readers see them, as they
// see the webhook endpoints the events go to; another merchant's event is not found.

const eventsPath = "/dashboard/events"

// eventTypes are the types the list filters by: every event type, and the test event an endpoint's
// page sends, which the list shows as the API does.
var eventTypes = append(slices.Clip(event.Types), event.WebhookEndpointPing)

// eventRoutes registers Developers → Events.
func (h *Handler) eventRoutes(r *httpapi.Router) {
	r.Handle("GET", eventsPath, h.requireRole(readers, h.events))
	r.Handle("GET", eventsPath+"/{id}", h.requireRole(readers, h.showEvent))
}

// eventsPage is what the list shows: the filter, its chip and a page of events.
type eventsPage struct {
	Type  string
	Types []string
	Chips []filterChip
	Rows  []event.Event
	Loc   *time.Location
	Pager pager
	Empty *emptyState // in place of the table when no event is listed
}

// events lists the merchant's events, newest first, all or those of one type. A type that is none
// of eventTypes, and a page cursor that names none of the merchant's events, is a 400 naming it.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := eventsPage{Type: q.Get("type"), Types: eventTypes, Loc: m.Location()}
	pg.Chips = chipsOf(eventsPath, url.Values{"type": {pg.Type}}, []filterParam{{"type", "Type"}}, nil)
	f := event.Filter{Limit: pageSize, StartingAfter: c.After, EndingBefore: c.Before}
	var err error
	var more bool
	switch {
	case pg.Type != "" && !slices.Contains(eventTypes, pg.Type):
		err = fault.Invalid("type", "Type must be an event type, such as %s.", event.CustomerCreated)
	case c.After != "" && c.Before != "":
		err = badPage("before")
	default:
		if pg.Type != "" {
			f.Types = []string{pg.Type}
		}
		err = h.cfg.DB.Read(r.Context(), func(qr store.Querier) error {
			var err error
			pg.Rows, more, err = webhook.ListEvents(r.Context(), qr, m.ID, f)
			return err
		})
		if errors.Is(err, event.ErrNotFound) {
			name := "after"
			if c.Before != "" {
				name = "before"
			}
			err = badPage(name)
		}
	}
	if h.listRefused(w, r, "events", "Events", pg, err) {
		return
	}
	if n := len(pg.Rows); n > 0 {
		pg.Pager = c.links(q, pg.Rows[0].ID, pg.Rows[n-1].ID, more)
	}
	switch {
	case len(pg.Rows) == 0 && pg.Type != "":
		pg.Empty = noMatch("events-empty", "No event is of type "+pg.Type+".", eventsPath)
	case len(pg.Rows) == 0:
		pg.Empty = &emptyState{ID: "events-empty", Heading: "No events yet",
			About: "An event is a fact Kassa records as it happens — a payment approved, a customer created, a subscription " +
				"charged — and sends to your webhook endpoints.",
			Action: actionIf(isManager(signedIn(r).Role), link{"Set up webhooks", webhooksPath})}
	}
	h.render(w, r, http.StatusOK, "events", view{Title: "Events", Wide: true, Data: pg})
}

// eventPage is what an event's page shows.
type eventPage struct {
	event.Event
	Object  string // the id of the object the event is about; "" when its payload names none
	Payload string // the payload, indented
	Loc     *time.Location
}

// showEvent shows one of the merchant's events; another merchant's, or none, is the 404 page.
func (h *Handler) showEvent(w http.ResponseWriter, r *http.Request) {
	m, ok := h.paymentsMerchant(w, r)
	if !ok {
		return
	}
	var p event.Placed
	err := h.cfg.DB.Read(r.Context(), func(qr store.Querier) error {
		var err error
		p, err = webhook.GetEvent(r.Context(), qr, m.ID, r.PathValue("id"))
		return err
	})
	if errors.Is(err, event.ErrNotFound) {
		h.notFound(w, r)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pg := eventPage{Event: p.Event, Object: objectOf(p.Data), Payload: string(p.Data), Loc: m.Location()}
	var out bytes.Buffer
	if json.Indent(&out, p.Data, "", "  ") == nil {
		pg.Payload = out.String()
	}
	h.render(w, r, http.StatusOK, "event", view{Title: "Event " + p.ID, Wide: true, Data: pg})
}

// objectOf is the id of the object an event's payload is, as the dashboard finds it: a transaction's
// transaction_id, or else the object's id when it is a string; "" for neither.
func objectOf(data json.RawMessage) string {
	var o struct {
		ID            any    `json:"id"`
		TransactionID string `json:"transaction_id"`
	}
	if json.Unmarshal(data, &o) != nil {
		return ""
	}
	if o.TransactionID != "" {
		return o.TransactionID
	}
	id, _ := o.ID.(string)
	return id
}

package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// The events API: GET /v1/events lists events with type and time filters and cursors, and GET
// /v1/events/{id} reads one, both with the v1 permission events:read. An event is read as it was
// recorded, from the events table or derived from the ledger (events.go); another merchant's is not
// found.

// WireEvent is an event as the v1 API shows it: data is the object as the API showed it when the
// event happened, created the time in Unix seconds, as the v1 API writes times.
type WireEvent struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Type    string          `json:"type"`
	Created int64           `json:"created"`
	Data    json.RawMessage `json:"data"`
}

// wireEvent renders e.
func wireEvent(e event.Event) WireEvent {
	return WireEvent{ID: e.ID, Object: "event", Type: e.Type, Created: e.CreatedAt.Unix(), Data: e.Data}
}

// RegisterEventRoutes registers GET /v1/events and GET /v1/events/{id} on r, behind the v1 API's key
// check (c.Protect) with the permission events:read, reading the events from db.
func RegisterEventRoutes(r *httpapi.Router, c *checkout.Service, db *store.DB) {
	a := eventsAPI{db: db}
	r.Handle("GET", "/v1/events", c.Protect(checkout.EventsRead, http.HandlerFunc(a.list)))
	r.Handle("GET", "/v1/events/{id}", c.Protect(checkout.EventsRead, http.HandlerFunc(a.get)))
}

type eventsAPI struct{ db *store.DB }

// list serves GET /v1/events: newest first, filtered by type and creation time, a page at a time with
// starting_after, ending_before and limit as every v1 list (checkout.ParseListParams).
func (a eventsAPI) list(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	who, err := checkout.CallerFrom(ctx).Who(httpapi.RequestID(ctx))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var events []event.Event
	var more bool
	err = a.db.Read(ctx, func(q store.Querier) error {
		var err error
		events, more, err = ListEvents(ctx, q, who.Merchant.ID, f)
		return err
	})
	if errors.Is(err, event.ErrNotFound) {
		field := "starting_after"
		if f.EndingBefore != "" {
			field = "ending_before"
		}
		err = fault.Invalid(field, "%s must be the id of one of this account's events", field)
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := checkout.List[WireEvent]{Object: "list", Data: make([]WireEvent, len(events)), HasMore: more}
	for i, e := range events {
		out.Data[i] = wireEvent(e)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// get serves GET /v1/events/{id}.
func (a eventsAPI) get(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	who, err := checkout.CallerFrom(ctx).Who(httpapi.RequestID(ctx))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var e event.Placed
	err = a.db.Read(ctx, func(q store.Querier) error {
		var err error
		e, err = GetEvent(ctx, q, who.Merchant.ID, r.PathValue("id"))
		return err
	})
	if errors.Is(err, event.ErrNotFound) {
		err = fault.NotFound("No such event.")
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, wireEvent(e.Event))
}

// parseFilter reads the list's query: the cursors and limit, type — one type, a comma-separated list
// of types, or a prefix such as transaction.* for every type that begins so — and created[gte] and
// created[lte], Unix seconds, both inclusive. Each bad one is a 400 naming it.
func parseFilter(q url.Values) (event.Filter, error) {
	p, err := checkout.ParseListParams(q)
	if err != nil {
		return event.Filter{}, err
	}
	f := event.Filter{Limit: p.Limit, StartingAfter: p.StartingAfter, EndingBefore: p.EndingBefore}
	if v := q.Get("type"); v != "" {
		if f.Types, err = parseTypes(v); err != nil {
			return event.Filter{}, err
		}
	}
	for _, b := range []struct {
		name string
		at   *time.Time
		end  bool
	}{{"created[gte]", &f.From, false}, {"created[lte]", &f.Until, true}} {
		v := q.Get(b.name)
		if v == "" {
			continue
		}
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s < 0 || s > 1<<40 {
			return event.Filter{}, fault.Invalid(b.name, "%s must be a time in Unix seconds", b.name)
		}
		if b.end {
			s++ // created[lte] takes in the whole second it names
		}
		*b.at = time.Unix(s, 0)
	}
	return f, nil
}

// parseTypes reads the type filter into the types it names: the event types, and the test event
// (event.WebhookEndpointPing), which the list shows as it shows every event.
func parseTypes(v string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		n := len(out)
		if prefix, ok := strings.CutSuffix(name, "*"); ok && strings.HasSuffix(prefix, ".") {
			for _, t := range append(slices.Clip(event.Types), event.WebhookEndpointPing) {
				if strings.HasPrefix(t, prefix) {
					out = append(out, t)
				}
			}
		} else if event.Known(name) || name == event.WebhookEndpointPing {
			out = append(out, name)
		}
		if len(out) == n {
			return nil, fault.Invalid("type", "type must be event types (such as transaction.approved) or prefixes of them "+
				"(such as transaction.*), separated by commas")
		}
	}
	return out, nil
}

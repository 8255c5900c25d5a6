package webhook

import (
	"context"
	"errors"
	"slices"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// A merchant's events come from three sources: the events table (event.Record), the ledger's
// outcomes (the derived transaction.* events, package payment) and the changes of payment intents
// (the derived payment_intent.* events, package checkout). The events API shows them as one list, in
// the merchant's order of events (event.Key), newest first; each source is read in that order through
// an index, from the cursor on, and the three are merged. The dashboard's Events page reads them
// through ListEvents and GetEvent too, so that it shows what the API serves.

// eventSources are the sources of events, each read as event.List reads the events table.
var eventSources = []struct {
	get  func(ctx context.Context, q store.Querier, merchantID, id string) (event.Placed, error)
	list func(ctx context.Context, q store.Querier, merchantID string, f event.Filter, bound event.Key, newer bool, n int) ([]event.Placed, error)
}{
	{event.Get, event.List},
	{payment.GetEvent, payment.ListEvents},
	{checkout.GetEvent, checkout.ListEvents},
}

// GetEvent returns the merchant's event id, of any source, with its place, or event.ErrNotFound.
func GetEvent(ctx context.Context, q store.Querier, merchantID, id string) (event.Placed, error) {
	for _, s := range eventSources {
		p, err := s.get(ctx, q, merchantID, id)
		if !errors.Is(err, event.ErrNotFound) {
			return p, err
		}
	}
	return event.Placed{}, event.ErrNotFound
}

// ListEvents returns the page of the merchant's events that f selects, newest first, and whether
// there are more beyond it (older ones after a page read with StartingAfter or neither, newer ones
// before a page read with EndingBefore). A cursor that names none of the merchant's events is
// event.ErrNotFound. Each source gives the f.Limit + 1 first beyond the cursor, so that the first
// f.Limit + 1 of them merged are those of every event.
func ListEvents(ctx context.Context, q store.Querier, merchantID string, f event.Filter) ([]event.Event, bool, error) {
	var bound event.Key
	newer := f.EndingBefore != ""
	if cursor := f.StartingAfter + f.EndingBefore; cursor != "" {
		p, err := GetEvent(ctx, q, merchantID, cursor)
		if err != nil {
			return nil, false, err
		}
		bound = p.Key
	}
	var all []event.Placed
	for _, s := range eventSources {
		some, err := s.list(ctx, q, merchantID, f, bound, newer, f.Limit+1)
		if err != nil {
			return nil, false, err
		}
		all = append(all, some...)
	}
	slices.SortFunc(all, func(a, b event.Placed) int { return a.Key.Compare(b.Key) })
	if !newer {
		slices.Reverse(all) // newest first
	}
	more := len(all) > f.Limit
	all = all[:min(len(all), f.Limit)]
	if newer {
		slices.Reverse(all) // read oldest first from the cursor; shown newest first
	}
	out := make([]event.Event, len(all))
	for i, p := range all {
		out[i] = p.Event
	}
	return out, more, nil
}

// Package eventtest reads the events a test's changes recorded, straight from the database (the events
// table, the ledger's outcomes and the changes of payment intents), and makes recording a row of events fail, to show that a change and
// its event are one transaction.
package eventtest

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Log is the events of one merchant, of every source — the events table, the ledger's outcomes and
// the changes of payment intents — read in the merchant's order of events (event.Key), the order the events API lists them in.
type Log struct {
	DB         *store.DB
	MerchantID string
	last       event.Key // the place of the last event read
}

// Next returns the events recorded since the last call, and fails t unless their types are want, in
// that order.
func (l *Log) Next(t testing.TB, want ...string) []event.Event {
	t.Helper()
	out := l.read(t)
	types := make([]string, len(out))
	for i, e := range out {
		types[i] = e.Type
	}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events recorded: %v, want %v", types, want)
	}
	return out
}

// All returns the events recorded since the last read, whatever they are, and marks them read.
func (l *Log) All(t testing.TB) []event.Event {
	t.Helper()
	return l.read(t)
}

// read returns the events after the last read, oldest first, and moves past them.
func (l *Log) read(t testing.TB) []event.Event {
	t.Helper()
	const most = 100_000
	ctx, q := context.Background(), l.DB.Reader()
	var all []event.Placed
	for _, list := range []func(context.Context, store.Querier, string, event.Filter, event.Key, bool, int) ([]event.Placed, error){
		event.List, payment.ListEvents, checkout.ListEvents,
	} {
		some, err := list(ctx, q, l.MerchantID, event.Filter{}, l.last, true, most)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, some...)
	}
	slices.SortFunc(all, func(a, b event.Placed) int { return a.Key.Compare(b.Key) })
	out := make([]event.Event, len(all))
	for i, p := range all {
		out[i] = p.Event
		l.last = p.Key
	}
	return out
}

// Data is the event's object, decoded as servertest decodes a response (numbers as json.Number), to
// compare with what the API answered.
func Data(t testing.TB, e event.Event) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(e.Data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("event %s: %v", e.ID, err)
	}
	return m
}

// Refuse makes the database refuse to record events whose type is LIKE pattern (an SQL pattern:
// "subscription.%"), until the returned function is called or t ends.
func Refuse(t testing.TB, db *store.DB, pattern string) (allow func()) {
	t.Helper()
	ctx := context.Background()
	create := []string{`CREATE TRIGGER refuse_events BEFORE INSERT ON events WHEN NEW.type LIKE '` + pattern + `'
		BEGIN SELECT RAISE(ABORT, 'events refused by the test'); END`}
	drop := []string{`DROP TRIGGER refuse_events`}
	if db.Dialect() == store.Postgres {
		create = []string{`CREATE FUNCTION refuse_events() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'events refused by the test'; END $$`,
			`CREATE TRIGGER refuse_events BEFORE INSERT ON events FOR EACH ROW WHEN (NEW.type LIKE '` + pattern + `')
			EXECUTE FUNCTION refuse_events()`}
		drop = []string{`DROP TRIGGER refuse_events ON events`, `DROP FUNCTION refuse_events()`}
	}
	for _, q := range create {
		if _, err := db.Raw().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := false
	allow = func() {
		if done {
			return
		}
		done = true
		for _, q := range drop {
			if _, err := db.Raw().ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(allow)
	return allow
}

// Shows fails t unless the event's object is want — what the API answered for the object — with,
// besides, the fields extra ("name", value, …).
func Shows(t testing.TB, e event.Event, want map[string]any, extra ...any) {
	t.Helper()
	got := Data(t, e)
	for i := 0; i+1 < len(extra); i += 2 {
		k := extra[i].(string)
		if got[k] != extra[i+1] {
			t.Errorf("%s %s: %s = %v, want %v", e.Type, e.ID, k, got[k], extra[i+1])
		}
		delete(got, k)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s %s shows\n%s\nthe API showed\n%v", e.Type, e.ID, e.Data, want)
	}
}

// Package eventtest reads the events a test's changes recorded, straight from the events table, and
// makes recording them fail, to show that a change and its event are one transaction.
package eventtest

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
)

// Log is the events of one merchant, read in the order recorded.
type Log struct {
	DB         *store.DB
	MerchantID string
	last       int64 // the row id of the last event read
}

// Next returns the events recorded since the last call, and fails t unless their types are want, in
// that order.
func (l *Log) Next(t testing.TB, want ...string) []event.Event {
	t.Helper()
	rows, err := l.DB.Reader().QueryContext(context.Background(), `SELECT id, event_id, type, data, created_at FROM events
		WHERE merchant_id = $1 AND id > $2 ORDER BY id`, l.MerchantID, l.last)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []event.Event
	var types []string
	for rows.Next() {
		e := event.Event{MerchantID: l.MerchantID}
		var data string
		var at int64
		if err := rows.Scan(&l.last, &e.ID, &e.Type, &data, &at); err != nil {
			t.Fatal(err)
		}
		e.Data, e.CreatedAt = json.RawMessage(data), time.UnixMilli(at)
		out = append(out, e)
		types = append(types, e.Type)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events recorded: %v, want %v", types, want)
	}
	return out
}

// Skip marks the events recorded so far as read, whatever they are.
func (l *Log) Skip(t testing.TB) {
	t.Helper()
	if err := l.DB.Reader().QueryRowContext(context.Background(), `SELECT COALESCE(MAX(id), 0) FROM events`).Scan(&l.last); err != nil {
		t.Fatal(err)
	}
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

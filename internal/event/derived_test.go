package event_test

import (
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
)

// A transaction's event keeps the id it had before other sources were derived (the ledger's row id
// in 15 digits after the time, written out here as the earlier code made it), each source's id reads
// back to its row and time, and no other spelling of a row's id reads as it.
func TestDerivedIDs(t *testing.T) {
	at := time.UnixMilli(1795864670123)
	for _, c := range []struct {
		row  int64
		at   time.Time
		want string
	}{
		{123456789, at, "evt_3OCKY2FXF2222222225PRNCP"},
		{1, time.UnixMilli(0), "evt_222222222222222222222223"},
		{1<<63 - 1, at, "evt_3OCKY2FXF22BZZZZZZZZZZZZ"},
	} {
		if got := event.DerivedID(event.Ledger, c.row, c.at); got != c.want {
			t.Errorf("transaction row %d: event id %s, want %s as before", c.row, got, c.want)
		}
	}
	for _, source := range []int{event.Ledger, event.Intent} {
		for _, row := range []int64{1, 123456789, 1<<63 - 1} {
			id := event.DerivedID(source, row, at)
			s, r, when, ok := event.ParseDerivedID(id)
			if !ok || s != source || r != row || !when.Equal(at) {
				t.Errorf("ParseDerivedID(%s) = %d, %d, %v, %v; want %d, %d, %v", id, s, r, when, ok, source, row, at)
			}
		}
	}
	if event.DerivedID(event.Ledger, 7, at) == event.DerivedID(event.Intent, 7, at) {
		t.Error("a transaction and a change of an intent with the same row id have the same event id")
	}
	for _, id := range []string{
		"evt_3OCKY2FXF232222222222223", // the row id 2^65 + 1, which 64 bits would carry round to 1
		"evt_3OCKY2FXF22C222222222222", // 2^63
		"evt_3OCKY2FXF222222222222222", // row 0
		"evt_3OCKY2FXF422222222222223", // a source that is none
		"evt_3OCKY2FXF22222222222223",  // a digit short
		"evt_3OCKY2FXF22222222222222a", // not a digit
		"ev_3OCKY2FXF222222222222223",  // not evt_
	} {
		if s, r, _, ok := event.ParseDerivedID(id); ok {
			t.Errorf("ParseDerivedID(%q) read source %d row %d; want no derived id", id, s, r)
		}
	}
}

package event

import (
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/sortid"
)

// Derived events are written nowhere as events: each is a committed row of its source — a
// transaction's outcome (Ledger), a change of a payment intent (Intent) — read as its event. Its id
// is a pure function of the row, so that the same row always has the same id: DerivedID.

// derivedDigits is how many base-32 digits (sortid.Digits) of a derived event's id name its row: the
// first names the source, the other 14 (70 bits, more than an id's 63) the row id.
const derivedDigits = 15

// DerivedID is the id of the event of source's row rowID, recorded at at: "evt_", the time in
// sortid's 9 digits, the source in one digit (Ledger 0, Intent 1: a transaction's event id is what it
// was before other sources were derived), then the row id in 14 digits of the same alphabet — 24
// characters, as every event id. ParseDerivedID reads it back.
func DerivedID(source int, rowID int64, at time.Time) string {
	ms := uint64(max(at.UnixMilli(), 0))
	b := make([]byte, 9+derivedDigits)
	for i := 8; i >= 0; i-- {
		b[i] = sortid.Digits[ms&31]
		ms >>= 5
	}
	b[9] = sortid.Digits[source-Ledger]
	id := uint64(rowID)
	for i := len(b) - 1; i >= 10; i-- {
		b[i] = sortid.Digits[id&31]
		id >>= 5
	}
	return "evt_" + string(b)
}

// ParseDerivedID reads a DerivedID: its source, row id and time. Any other string is not one (ok
// false); an id that reads is only the row's event if the row is recorded at that time, which the
// source checks.
func ParseDerivedID(s string) (source int, rowID int64, at time.Time, ok bool) {
	digits, found := strings.CutPrefix(s, "evt_")
	if !found || len(digits) != 9+derivedDigits {
		return 0, 0, time.Time{}, false
	}
	var ms, id uint64
	for i := range len(digits) {
		v := strings.IndexByte(sortid.Digits, digits[i])
		switch {
		case v < 0:
			return 0, 0, time.Time{}, false
		case i < 9:
			ms = ms<<5 | uint64(v)
		case i == 9:
			source = Ledger + v
		case id>>58 != 0: // another digit would carry the id past 64 bits
			return 0, 0, time.Time{}, false
		default:
			id = id<<5 | uint64(v)
		}
	}
	if source != Ledger && source != Intent || id == 0 || id > 1<<63-1 {
		return 0, 0, time.Time{}, false
	}
	return source, int64(id), time.UnixMilli(int64(ms)), true
}

// Row is a derived event's row in its merchant's commit order, as its source gives it to the
// delivery engine: the row id, its place and the event's type.
type Row struct {
	ID, Seq int64
	Type    string
}

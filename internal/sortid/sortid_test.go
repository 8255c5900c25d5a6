package sortid

import (
	"strings"
	"testing"
	"time"
)

func TestIDsSortAsTheirTimes(t *testing.T) {
	at := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	prev := ""
	for i := range 2000 {
		id := New(at.Add(time.Duration(i)*time.Millisecond), 20)
		if len(id) != 20 {
			t.Fatalf("%q: %d characters, want 20", id, len(id))
		}
		if s := strings.Trim(id, Digits); s != "" {
			t.Fatalf("%q has characters outside %s", id, Digits)
		}
		if id <= prev {
			t.Fatalf("%q made 1 ms after %q sorts before it", id, prev)
		}
		prev = id
	}
	// The epoch and the last millisecond that 9 digits hold.
	if id := New(time.UnixMilli(0), 12); id[:9] != "222222222" {
		t.Fatalf("epoch: %q", id)
	}
	if id := New(time.UnixMilli(1<<45-1), 12); id[:9] != "ZZZZZZZZZ" {
		t.Fatalf("last millisecond: %q", id)
	}
}

func TestIDsOfOneMillisecondDiffer(t *testing.T) {
	at := time.Now()
	seen := map[string]bool{}
	for range 10000 {
		id := New(at, 20)
		if seen[id] {
			t.Fatalf("%q made twice in one millisecond", id)
		}
		seen[id] = true
	}
}

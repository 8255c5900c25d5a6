package password

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// slowHash is a hash whose check takes a few hundred milliseconds: long enough for every goroutine
// of a test to have queued before the first check ends.
func slowHash() string { return hashWith("the right one", 8) }

// verifyAll runs n untrusted verifications of a wrong password at once and counts the answers.
func verifyAll(g *Gate, hash string, n int) (checked, busy int, other []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			ok, err := g.Verify(context.Background(), hash, "wrong", false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && !ok:
				checked++
			case errors.Is(err, ErrBusy):
				busy++
			default:
				other = append(other, fmt.Errorf("ok %v, err %v", ok, err))
			}
		})
	}
	wg.Wait()
	return checked, busy, other
}

// Beyond the slots and the queue, a verification is refused at once, unchecked.
func TestGateRefusesBeyondItsQueue(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Queue: 2, Wait: time.Minute})
	checked, busy, other := verifyAll(g, slowHash(), 10)
	if checked != 3 || busy != 7 || other != nil {
		t.Fatalf("10 at once with 1 slot and 2 places in the queue: %d checked, %d busy, %v; want 3 and 7", checked, busy, other)
	}
	if ok, err := g.Verify(context.Background(), "", "anything", false); ok || err != nil {
		t.Fatalf("the dummy hash after the rush: %v %v", ok, err)
	}
}

// A queued verification waits at most Wait, and no longer than its context.
func TestGateWaitIsBounded(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Wait: 50 * time.Millisecond})
	if checked, busy, other := verifyAll(g, slowHash(), 3); checked != 1 || busy != 2 || other != nil {
		t.Fatalf("3 at once, waiting 50ms for a check of several hundred: %d checked, %d busy, %v", checked, busy, other)
	}

	g = NewGate(GateConfig{Slots: 1, Wait: time.Minute})
	hash := slowHash()
	started := make(chan struct{})
	go func() {
		close(started)
		g.Verify(context.Background(), hash, "wrong", false)
	}()
	<-started
	time.Sleep(20 * time.Millisecond) // the first holds the slot
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := g.Verify(ctx, hash, "wrong", true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its context: %v", err)
	}
}

// Trusted verifications are served before the untrusted ones that queued earlier.
func TestGateServesTrustedFirst(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Queue: 4, Wait: time.Minute})
	hash := slowHash()
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	verify := func(name string, trusted bool) {
		wg.Go(func() {
			g.Verify(context.Background(), hash, "wrong", trusted)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		})
		time.Sleep(10 * time.Millisecond) // queue in this order
	}
	verify("first", false)
	for _, name := range []string{"u1", "u2", "u3"} {
		verify(name, false)
	}
	verify("trusted", true)
	wg.Wait()
	if len(order) != 5 || order[0] != "first" || order[1] != "trusted" {
		t.Fatalf("order of checks %v: the trusted one must come right after the one running", order)
	}
}

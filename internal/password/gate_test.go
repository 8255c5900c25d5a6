package password

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// hold takes g's only slot, as a running check would, until the returned release.
func hold(t *testing.T, g *Gate) (release func()) {
	t.Helper()
	if err := g.acquire(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return g.release
}

// waitQueued waits until n verifications of the kind wait in g's queue.
func waitQueued(g *Gate, trusted bool, n int) {
	kind := 0
	if trusted {
		kind = 1
	}
	for {
		g.mu.Lock()
		queued := len(g.waiting[kind])
		g.mu.Unlock()
		if queued == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Beyond the slots and the queue, a verification is refused at once, unchecked; the queued ones are
// checked as the slot comes free.
func TestGateRefusesBeyondItsQueue(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Queue: 2, Wait: time.Minute})
	release := hold(t, g)
	var mu sync.Mutex
	var checked, busy int
	var other []error
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ok, err := g.Verify(context.Background(), "", "wrong", false)
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
	waitQueued(g, false, 2)
	var refusedAtOnce int
	for deadline := time.Now().Add(5 * time.Second); refusedAtOnce < 8 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		refusedAtOnce = busy
		mu.Unlock()
	}
	release()
	wg.Wait()
	if refusedAtOnce != 8 || checked != 2 || busy != 8 || other != nil {
		t.Fatalf("10 while the slot is held, 2 places in the queue: %d refused at once, then %d checked, %d busy, %v",
			refusedAtOnce, checked, busy, other)
	}
}

// A queued verification waits at most Wait, and no longer than its context.
func TestGateWaitIsBounded(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Wait: 20 * time.Millisecond})
	release := hold(t, g)
	defer release()
	if _, err := g.Verify(context.Background(), "", "wrong", false); !errors.Is(err, ErrBusy) {
		t.Fatalf("a wait past Wait: %v", err)
	}
	g = NewGate(GateConfig{Slots: 1, Wait: time.Minute})
	defer hold(t, g)()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.Verify(ctx, "", "wrong", true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its context: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting[0])+len(g.waiting[1]) != 0 {
		t.Fatal("a verification that gave up is still queued")
	}
}

// Trusted verifications are served before the untrusted ones that queued earlier.
func TestGateServesTrustedFirst(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Queue: 4, Wait: time.Minute})
	release := hold(t, g)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	verify := func(name string, trusted bool) {
		wg.Go(func() {
			if ok, err := g.Verify(context.Background(), "", "wrong", trusted); ok || err != nil {
				t.Errorf("%s: %v %v", name, ok, err)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		})
	}
	for _, name := range []string{"u1", "u2", "u3"} {
		verify(name, false)
	}
	waitQueued(g, false, 3)
	verify("trusted", true)
	waitQueued(g, true, 1)
	release()
	wg.Wait()
	if len(order) != 4 || order[0] != "trusted" {
		t.Fatalf("order of checks %v: the trusted one must come first", order)
	}
}

// A new hash waits for a slot as a verification does, and is refused ErrBusy beyond the queue; a
// password outside the length limits is refused before it waits.
func TestGateBoundsHashing(t *testing.T) {
	t.Parallel()
	g := NewGate(GateConfig{Slots: 1, Queue: 1, Wait: time.Minute})
	release := hold(t, g)
	if _, err := g.Hash(context.Background(), "short", true); !errors.Is(err, ErrTooShort) {
		t.Fatalf("a short password while the slot is held: %v", err)
	}
	queued := make(chan error, 1)
	go func() {
		h, err := g.Hash(context.Background(), "a long enough passphrase", true)
		if err == nil {
			var ok bool
			ok, err = g.Verify(context.Background(), h, "a long enough passphrase", true)
			if !ok && err == nil {
				err = errors.New("the hash does not verify")
			}
		}
		queued <- err
	}()
	waitQueued(g, true, 1)
	if _, err := g.Hash(context.Background(), "another passphrase", true); !errors.Is(err, ErrBusy) {
		t.Fatalf("a hash beyond the queue: %v, want ErrBusy", err)
	}
	release()
	if err := <-queued; err != nil {
		t.Fatalf("the queued hash: %v", err)
	}
}

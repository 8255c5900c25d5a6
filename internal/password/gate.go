package password

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrBusy is a Gate's answer when no slot came free in time: the password was neither checked nor
// hashed.
var ErrBusy = errors.New("password: too many passwords being hashed; try again shortly")

// GateConfig sizes a Gate; a zero field takes its default.
type GateConfig struct {
	// Slots is how many verifications may run at once: each holds its hash's memory (64 MiB with
	// the current parameters) for its duration.
	Slots int
	// Queue is how many verifications of each kind, trusted and untrusted, may wait for a slot;
	// whoever comes beyond it is refused at once.
	Queue int
	// Wait is how long a verification waits for a slot before it is refused.
	Wait time.Duration
}

// The defaults of a Gate: one verification at a time (64 MiB; with two lanes it keeps two cores
// busy), four waiting of each kind, for at most two seconds.
const (
	DefaultSlots = 1
	DefaultQueue = 4
	DefaultWait  = 2 * time.Second
)

// Gate bounds how many argon2id computations, verifications and new hashes together, run at once, and
// so the memory they hold: a flood of sign-ins or of password changes cannot exhaust the server's
// memory. Attempts made with some trust (a merchant's device
// cookie, its usual address, its client credentials) wait in a queue of their own that is served
// first, so that a flood of guesses cannot keep the merchants themselves from signing in.
type Gate struct {
	queue int
	wait  time.Duration

	mu      sync.Mutex
	free    int                // slots nobody holds; while some are free nobody waits
	waiting [2][]chan struct{} // untrusted, trusted: closed when the slot is handed over
}

// NewGate returns a Gate.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	return &Gate{queue: cfg.Queue, wait: cfg.Wait, free: cfg.Slots}
}

// Verify reports whether pw matches hash, within the bound; an empty hash is checked against a dummy,
// so that an unknown account costs the same as a known one, and a malformed one matches nothing.
// trusted says which queue the attempt joins. The error is not nil only when nothing was hashed:
// ErrBusy when the attempt's queue is full or no slot came free within the wait, ctx's error when
// ctx ended first.
func (g *Gate) Verify(ctx context.Context, hash, pw string, trusted bool) (bool, error) {
	if err := g.acquire(ctx, trusted); err != nil {
		return false, err
	}
	defer g.release()
	if hash == "" {
		hash = dummy()
	}
	ok, _ := verify(hash, pw)
	return ok, nil
}

// Hash returns the PHC string of an argon2id hash of pw, computed within the bound; trusted says which
// queue it joins. A password outside the length limits is refused (ErrTooShort, ErrTooLong) before
// anything waits; ErrBusy and ctx's error are Verify's.
func (g *Gate) Hash(ctx context.Context, pw string, trusted bool) (string, error) {
	if err := Check(pw); err != nil {
		return "", err
	}
	if err := g.acquire(ctx, trusted); err != nil {
		return "", err
	}
	defer g.release()
	return hash(pw)
}

// acquire takes a slot, waiting in the queue of its kind when none is free.
func (g *Gate) acquire(ctx context.Context, trusted bool) error {
	kind := 0
	if trusted {
		kind = 1
	}
	g.mu.Lock()
	if g.free > 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	if len(g.waiting[kind]) >= g.queue {
		g.mu.Unlock()
		return ErrBusy
	}
	handed := make(chan struct{})
	g.waiting[kind] = append(g.waiting[kind], handed)
	g.mu.Unlock()

	t := time.NewTimer(g.wait)
	defer t.Stop()
	err := ErrBusy
	select {
	case <-handed:
		return nil
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	if i := slices.Index(g.waiting[kind], handed); i >= 0 {
		g.waiting[kind] = slices.Delete(g.waiting[kind], i, i+1)
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	// The slot was handed over as the wait ended: pass it on.
	g.release()
	return err
}

// release hands the slot to the first trusted waiter, else to the first untrusted one, else frees it.
func (g *Gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for kind := 1; kind >= 0; kind-- {
		if len(g.waiting[kind]) > 0 {
			close(g.waiting[kind][0])
			g.waiting[kind] = g.waiting[kind][1:]
			return
		}
	}
	g.free++
}

package password

import (
	"context"
	"errors"
	"time"
)

// ErrBusy is Gate.Verify's answer when no verification slot came free in time: the password was not
// checked.
var ErrBusy = errors.New("password: too many verifications running; try again shortly")

// GateConfig sizes a Gate; a zero field takes its default.
type GateConfig struct {
	// Slots is how many verifications may run at once: each holds its hash's memory (64 MiB with
	// the current parameters) for its duration.
	Slots int
	// Shared is how many of the slots untrusted attempts may take; the others are kept for trusted
	// ones. At most Slots.
	Shared int
	// Queue is how many verifications of each kind may wait for a slot; whoever comes beyond it is
	// refused at once.
	Queue int
	// Wait is how long a queued verification waits for a slot before it is refused.
	Wait time.Duration
}

// The defaults of a Gate: two verifications at once (128 MiB), one of them kept for trusted
// attempts, eight waiting of each kind for at most two seconds.
const (
	DefaultSlots  = 2
	DefaultShared = 1
	DefaultQueue  = 8
	DefaultWait   = 2 * time.Second
)

// Gate bounds how many argon2id verifications run at once, and so the memory they hold (issue 14:
// "Password hashing cannot exhaust memory"). Attempts made with some trust (a merchant's device
// cookie, its usual address, its client credentials) queue apart from the others and may use every
// slot; untrusted attempts use only the shared ones, so that a flood of guesses cannot keep the
// merchants themselves from signing in.
type Gate struct {
	slots  chan struct{} // one per running verification
	shared chan struct{} // one per untrusted verification holding or waiting for a slot
	queue  [2]chan struct{}
	wait   time.Duration
}

// NewGate returns a Gate.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Shared <= 0 || cfg.Shared > cfg.Slots {
		cfg.Shared = min(DefaultShared, cfg.Slots)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	return &Gate{
		slots:  make(chan struct{}, cfg.Slots),
		shared: make(chan struct{}, cfg.Shared),
		queue:  [2]chan struct{}{make(chan struct{}, cfg.Shared+cfg.Queue), make(chan struct{}, cfg.Slots+cfg.Queue)},
		wait:   cfg.Wait,
	}
}

// Verify reports whether pw matches hash, within the bound; an empty hash is checked against Dummy,
// so that an unknown account costs the same as a known one, and a malformed one matches nothing.
// trusted says which queue the attempt joins. The error is not nil only when nothing was hashed:
// ErrBusy when the attempt's queue is full or no slot came free within the wait, ctx's error when
// ctx ended first.
func (g *Gate) Verify(ctx context.Context, hash, pw string, trusted bool) (bool, error) {
	q := g.queue[0]
	if trusted {
		q = g.queue[1]
	}
	select {
	case q <- struct{}{}:
		defer func() { <-q }()
	default:
		return false, ErrBusy
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	if !trusted {
		if err := acquire(ctx, t.C, g.shared); err != nil {
			return false, err
		}
		defer func() { <-g.shared }()
	}
	if err := acquire(ctx, t.C, g.slots); err != nil {
		return false, err
	}
	defer func() { <-g.slots }()
	if hash == "" {
		hash = Dummy()
	}
	ok, _ := Verify(hash, pw)
	return ok, nil
}

// acquire takes a place in sem, unless timeout fires or ctx ends first.
func acquire(ctx context.Context, timeout <-chan time.Time, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-timeout:
		return ErrBusy
	case <-ctx.Done():
		return ctx.Err()
	}
}

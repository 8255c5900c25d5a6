package processortest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/kassapay/kassa/internal/processor"
)

// Unreachable is a processor behind a line that can fail: while Down is set, an authorization or a
// refund fails before the processor receives it, as when the line drops or the process dies between recording the
// attempt and asking; the processor's Lookup then answers that it never received it.
type Unreachable struct {
	processor.Processor
	Down atomic.Bool
}

// Authorize fails without an answer while Down is set, and asks the processor otherwise.
func (u *Unreachable) Authorize(ctx context.Context, p processor.Payment) (processor.Result, error) {
	if u.Down.Load() {
		return processor.Result{}, errors.New("connection refused")
	}
	return u.Processor.Authorize(ctx, p)
}

// Refund fails without an answer while Down is set, and asks the processor otherwise.
func (u *Unreachable) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	if u.Down.Load() {
		return processor.Result{}, errors.New("connection refused")
	}
	return u.Processor.Refund(ctx, f)
}

package stripe_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/stripe"
)

// lost runs call under the trace Prepare gives, with the route's answer lost (or the request never
// arriving, as how says), and returns the Operation to look it up by.
func lost(t *testing.T, f *fake, p processor.Processor, route, how string, op processor.Operation, call func(ctx context.Context, trace string) (processor.Result, error)) processor.Operation {
	t.Helper()
	trace, err := p.(processor.Preparer).Prepare(context.Background(), processor.Merchant{})
	if err != nil {
		t.Fatal(err)
	}
	// The call gives up as soon as the fake has done (or not done) the work: the answer never comes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.injectThen(route, how, 1, cancel)
	if r, err := call(ctx, trace); err == nil {
		t.Fatalf("%s %s: decided %+v", route, how, r)
	}
	op.Trace = trace
	return op
}

func (f *fake) sale(t *testing.T, p processor.Processor, ref, pan string, amount int64, capture bool, how string) processor.Operation {
	t.Helper()
	kind := processor.OperationAuthorization
	if capture {
		kind = processor.OperationSale
	}
	route := "POST /v1/payment_intents"
	if amount == 0 {
		route = "POST /v1/setup_intents"
	}
	return lost(t, f, p, route, how, processor.Operation{Reference: ref, Kind: kind, Amount: amount, Currency: cad},
		func(ctx context.Context, trace string) (processor.Result, error) {
			pay := payment(t, ref, pan, amount, capture)
			pay.Trace = trace
			return p.Authorize(ctx, pay)
		})
}

// followUp loses the answer to a capture, void or refund of original.
func (f *fake) followUp(t *testing.T, p processor.Processor, kind, ref, original, how string) processor.Operation {
	t.Helper()
	route, call := map[string]string{processor.OperationCapture: "POST /v1/payment_intents/{id}/capture",
		processor.OperationVoid: "POST /v1/payment_intents/{id}/cancel", processor.OperationRefund: "POST /v1/refunds"}[kind],
		map[string]func(context.Context, processor.FollowUp) (processor.Result, error){processor.OperationCapture: p.Capture,
			processor.OperationVoid: p.Void, processor.OperationRefund: p.Refund}[kind]
	return lost(t, f, p, route, how, processor.Operation{Reference: ref, Kind: kind, Amount: 500, Currency: cad},
		func(ctx context.Context, trace string) (processor.Result, error) {
			return call(ctx, processor.FollowUp{Reference: ref, Original: original, Amount: 500, Currency: cad, Trace: trace})
		})
}

// What became of a sale or authorization whose answer was lost: found by the search when it is
// indexed, by the events when it is not yet, with the outcome Stripe recorded.
func TestLookupOfPayments(t *testing.T) {
	t.Parallel()
	for _, lag := range []time.Duration{0, time.Hour} {
		f := newFake(t)
		f.searchLag = lag
		p := f.open(stripe.KindConfig{})
		for _, tc := range []struct {
			pan     string
			amount  int64
			capture bool
			code    string // "" for approved
			prefix  string
		}{
			{cardtest.Visa, 1000, true, "", "pi_"},
			{cardtest.Visa, 1000, false, "", "pi_"},
			{cardtest.InsufficientFunds, 1000, true, processor.CodeInsufficientFunds, "pi_"},
			{cardtest.ExpiredCard, 1000, false, processor.CodeExpiredCard, "pi_"},
			{cardtest.ThreeDSecure, 1000, true, processor.CodeAuthenticationRequired, "pi_"},
			{cardtest.Visa, 0, false, "", "seti_"},
			{cardtest.StolenCard, 0, false, processor.CodeStolenCard, "seti_"},
		} {
			ref := "lookup-" + tc.pan[12:] + "-" + map[bool]string{true: "sale", false: "auth"}[tc.capture] + "-" + lag.String()
			if tc.amount == 0 {
				ref += "-verify"
			}
			op := f.sale(t, p, ref, tc.pan, tc.amount, tc.capture, "lose")
			searches, lists := len(f.received("GET /v1/payment_intents/search")), len(f.received("GET /v1/events"))
			r, err := p.Lookup(context.Background(), op)
			if err != nil || r.Approved != (tc.code == "") || r.Code != tc.code || r.Message == "" || !strings.HasPrefix(r.Reference, tc.prefix) {
				t.Errorf("%s (search lag %v): %+v, %v; want code %q", ref, lag, r, err, tc.code)
			}
			searched, listed := len(f.received("GET /v1/payment_intents/search")) > searches, len(f.received("GET /v1/events")) > lists
			switch {
			case tc.amount == 0 && (searched || !listed):
				t.Errorf("%s: a card verification is not searched, its events are listed (searched %v, listed %v)", ref, searched, listed)
			case tc.amount > 0 && (!searched || listed != (lag > 0)):
				t.Errorf("%s (search lag %v): searched %v, listed events %v", ref, lag, searched, listed)
			}
		}
	}
}

// What became of a capture, void or refund whose answer was lost: the event its request left.
func TestLookupOfFollowUps(t *testing.T) {
	t.Parallel()
	f, p := start(t)
	ctx := context.Background()
	auth, _ := p.Authorize(ctx, payment(t, "fu-auth", cardtest.Visa, 1000, false))
	op := f.followUp(t, p, processor.OperationCapture, "fu-capture", auth.Reference, "lose")
	if r, err := p.Lookup(ctx, op); err != nil || !r.Approved || r.Reference != auth.Reference {
		t.Errorf("capture: %+v, %v", r, err)
	}
	op = f.followUp(t, p, processor.OperationRefund, "fu-refund", auth.Reference, "lose")
	if r, err := p.Lookup(ctx, op); err != nil || !r.Approved || !strings.HasPrefix(r.Reference, "re_") {
		t.Errorf("refund: %+v, %v", r, err)
	}
	auth2, _ := p.Authorize(ctx, payment(t, "fu-auth2", cardtest.Visa, 1000, false))
	op = f.followUp(t, p, processor.OperationVoid, "fu-void", auth2.Reference, "lose")
	if r, err := p.Lookup(ctx, op); err != nil || !r.Approved || r.Reference != auth2.Reference {
		t.Errorf("void: %+v, %v", r, err)
	}
}

// An operation that never reached Stripe is reported never received only once a request for it can
// no longer arrive (Settle after its trace); until then, and when Stripe cannot be asked, the outcome
// stays unknown. An operation without a trace: a sale that the search does not find was never
// received, a follow-up stays unknown.
func TestLookupOfWhatNeverArrived(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	p := f.open(stripe.KindConfig{Settle: 2 * time.Minute})
	ctx := context.Background()
	auth, _ := p.Authorize(ctx, payment(t, "never-auth", cardtest.Visa, 1000, false))
	ops := []processor.Operation{
		f.sale(t, p, "never-sale", cardtest.Visa, 1000, true, "hang"),
		f.sale(t, p, "never-verify", cardtest.Visa, 0, false, "hang"),
		f.followUp(t, p, processor.OperationCapture, "never-capture", auth.Reference, "hang"),
		f.followUp(t, p, processor.OperationVoid, "never-void", auth.Reference, "hang"),
		f.followUp(t, p, processor.OperationRefund, "never-refund", auth.Reference, "hang"),
	}
	// A declined capture did nothing at Stripe: no event, so never received, like one that never
	// arrived.
	refused := f.followUp(t, p, processor.OperationCapture, "never-refused", auth.Reference, "hang")
	if r, err := p.Capture(ctx, processor.FollowUp{Reference: "never-refused", Original: auth.Reference, Amount: 9999, Currency: cad}); err != nil || r.Approved {
		t.Fatalf("capture above the authorization: %+v, %v", r, err)
	}
	ops = append(ops, refused)
	for _, op := range ops {
		if r, err := p.Lookup(ctx, op); err == nil || errors.Is(err, processor.ErrNotFound) {
			t.Errorf("%s just after: %+v, %v; want an error (not yet certain)", op.Reference, r, err)
		}
	}
	f.clock.Advance(2*time.Minute - time.Second)
	for _, op := range ops {
		if _, err := p.Lookup(ctx, op); err == nil || errors.Is(err, processor.ErrNotFound) {
			t.Errorf("%s a second before Settle: %v; want an error", op.Reference, err)
		}
	}
	f.inject("GET /v1/events", "500", -1)
	f.clock.Advance(time.Second)
	for _, op := range ops {
		if _, err := p.Lookup(ctx, op); err == nil || errors.Is(err, processor.ErrNotFound) {
			t.Errorf("%s while Stripe answers 500: %v; want an error", op.Reference, err)
		}
	}
	f.inject("GET /v1/events", "", 0)
	for _, op := range ops {
		if r, err := p.Lookup(ctx, op); !errors.Is(err, processor.ErrNotFound) {
			t.Errorf("%s after Settle: %+v, %v; want ErrNotFound", op.Reference, r, err)
		}
	}

	// Without a trace.
	for _, op := range ops {
		op.Trace = ""
		_, err := p.Lookup(ctx, op)
		if op.Kind == processor.OperationSale && !errors.Is(err, processor.ErrNotFound) || op.Kind != processor.OperationSale && (err == nil || errors.Is(err, processor.ErrNotFound)) {
			t.Errorf("%s without a trace: %v", op.Reference, err)
		}
	}
	f.inject("GET /v1/payment_intents/search", "503", -1)
	if _, err := p.Lookup(ctx, processor.Operation{Reference: "never-sale", Kind: processor.OperationSale, Amount: 1000, Currency: cad}); err == nil || errors.Is(err, processor.ErrNotFound) {
		t.Errorf("without a trace, while the search answers 503: %v; want an error", err)
	}
}

// The events are paged through, and only those of the operation's window are asked for.
func TestLookupPagesThroughEvents(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.searchLag = 24 * time.Hour
	f.pageSize = 2
	p := f.open(stripe.KindConfig{Settle: time.Minute})
	ctx := context.Background()
	op := f.sale(t, p, "paged", cardtest.Visa, 1000, true, "lose")
	for i := range 7 {
		if r, err := p.Authorize(ctx, payment(t, "paged-other-"+string(rune('a'+i)), cardtest.Visa, 1000, true)); err != nil || !r.Approved {
			t.Fatal(r, err)
		}
	}
	f.clock.Advance(time.Hour)
	for i := range 3 { // outside the window: never listed
		p.Authorize(ctx, payment(t, "paged-later-"+string(rune('a'+i)), cardtest.Visa, 1000, true))
	}
	lists := len(f.received("GET /v1/events"))
	if r, err := p.Lookup(ctx, op); err != nil || !r.Approved {
		t.Fatalf("%+v, %v", r, err)
	}
	got := f.received("GET /v1/events")[lists:]
	if len(got) != 4 { // 8 payment_intent.created in the window, 2 a page
		t.Errorf("%d pages listed, want 4", len(got))
	}
	first := got[0].Form
	if first.Get("type") != "payment_intent.created" || first.Get("limit") != "100" || first.Get("created[gte]") != sub(op.Trace, 60) ||
		first.Get("created[lte]") != sub(op.Trace, -60) {
		t.Errorf("events asked for with %v (trace %s)", first, op.Trace)
	}
}

// sub is trace - secs, as a decimal string.
func sub(trace string, secs int64) string {
	n, _ := strconv.ParseInt(trace, 10, 64)
	return strconv.FormatInt(n-secs, 10)
}

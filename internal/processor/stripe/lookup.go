package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v86"

	"github.com/kassapay/kassa/internal/processor"
)

// Lookup finds what became of an operation whose answer Kassa did not record, by Kassa's reference.
//
// A sale or authorization is first searched for among PaymentIntents by its metadata. Stripe's
// search is eventually consistent ("data is searchable in under 1 minute" normally, later during an
// outage), so finding nothing proves nothing. What does is Stripe's list of events, which is
// consistent like every list API: every request that changed something left an event that carries
// the request's Idempotency-Key (Kassa's reference). Lookup lists the events of the one type the
// operation leaves (payment_intent.created, setup_intent.created for a card verification,
// payment_intent.succeeded for a capture, payment_intent.canceled for a void, refund.created) created
// within Settle either side of the operation's trace (the time Prepare gave it), and reads the
// outcome from the object the event names. A capture, void or refund that Stripe refused left no
// event, and did nothing.
//
// Nothing found is ErrNotFound only once Settle has passed since the trace: until then a request may
// still be on its way to Stripe, and Lookup answers an error (ask again later). An operation without
// a trace can only be searched for: a sale or authorization that the search does not find is then
// reported never received, which is as sure as Stripe's search index (the payments core asks no
// sooner than twice its processor timeout after the attempt, except after a crash of a single
// server); a card verification, capture, void or refund without a trace stays unknown.
func (p *Processor) Lookup(ctx context.Context, op processor.Operation) (processor.Result, error) {
	switch op.Kind {
	case processor.OperationSale, processor.OperationAuthorization:
		if op.Amount == 0 {
			ev, err := p.event(ctx, op, stripego.EventTypeSetupIntentCreated)
			if err != nil {
				return processor.Result{}, err
			}
			si, err := p.api.V1SetupIntents.Retrieve(ctx, objectID(ev), nil)
			if err != nil {
				return processor.Result{}, lookupFailed("setup intent", op.Reference, err)
			}
			return setupIntentResult(si)
		}
		id, err := p.search(ctx, op.Reference)
		switch {
		case id == "" && op.Trace == "" && err == nil:
			return processor.Result{}, processor.ErrNotFound
		case id == "" && op.Trace == "":
			return processor.Result{}, err
		case id == "":
			// The events decide, whether the search found nothing or failed.
			ev, err := p.event(ctx, op, stripego.EventTypePaymentIntentCreated)
			if err != nil {
				return processor.Result{}, err
			}
			id = objectID(ev)
		}
		pi, err := p.api.V1PaymentIntents.Retrieve(ctx, id, nil)
		if err != nil {
			return processor.Result{}, lookupFailed("payment intent", op.Reference, err)
		}
		return paymentIntentResult(pi)
	case processor.OperationCapture, processor.OperationVoid:
		typ := stripego.EventTypePaymentIntentSucceeded
		if op.Kind == processor.OperationVoid {
			typ = stripego.EventTypePaymentIntentCanceled
		}
		ev, err := p.event(ctx, op, typ)
		if err != nil {
			return processor.Result{}, err
		}
		return approved(objectID(ev)), nil
	case processor.OperationRefund:
		ev, err := p.event(ctx, op, stripego.EventTypeRefundCreated)
		if err != nil {
			return processor.Result{}, err
		}
		var r stripego.Refund
		if err := json.Unmarshal(ev.Data.Raw, &r); err != nil {
			return processor.Result{}, fmt.Errorf("stripe: event %s: %w", ev.ID, err)
		}
		return refundResult(&r), nil
	}
	return processor.Result{}, fmt.Errorf("stripe: lookup of %s: unknown kind of operation %q", op.Reference, op.Kind)
}

// search returns the PaymentIntent whose metadata holds ref, or "" when the search finds none.
func (p *Processor) search(ctx context.Context, ref string) (string, error) {
	// Search query language: a string value is quoted, and a quote or backslash inside it escaped.
	q := fmt.Sprintf("metadata['%s']:'%s'", metadataKey, strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(ref))
	list := p.api.V1PaymentIntents.Search(ctx, &stripego.PaymentIntentSearchParams{SearchParams: stripego.SearchParams{Query: q}})
	for pi, err := range list.All(ctx) {
		if err != nil {
			return "", lookupFailed("payment intent search", ref, err)
		}
		return pi.ID, nil
	}
	return "", nil
}

// event returns the event of type typ that the request for op caused: the one whose Idempotency-Key
// is op's reference, among those created within Settle of op's trace.
func (p *Processor) event(ctx context.Context, op processor.Operation, typ stripego.EventType) (*stripego.Event, error) {
	secs, err := strconv.ParseInt(op.Trace, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("stripe: lookup of %s %s: it has no trace of when it was sent, so Stripe's events cannot tell", op.Kind, op.Reference)
	}
	sent := time.Unix(secs, 0)
	// Read the clock before listing: nothing can join the window after Settle has passed, so a list
	// begun after that is complete.
	settled := !p.now().Before(sent.Add(p.settle))
	params := &stripego.EventListParams{
		Type: stripego.String(string(typ)),
		CreatedRange: &stripego.RangeQueryParams{
			GreaterThanOrEqual: sent.Add(-p.settle).Unix(),
			LesserThanOrEqual:  sent.Add(p.settle).Unix(),
		},
	}
	params.Limit = stripego.Int64(100)
	for ev, err := range p.api.V1Events.List(ctx, params).All(ctx) {
		if err != nil {
			return nil, lookupFailed("event list", op.Reference, err)
		}
		if ev.Request != nil && ev.Request.IdempotencyKey == op.Reference {
			return ev, nil
		}
	}
	if !settled {
		return nil, fmt.Errorf("stripe: lookup of %s %s: not at Stripe yet, and a request may still reach it until %s",
			op.Kind, op.Reference, sent.Add(p.settle).UTC().Format(time.RFC3339))
	}
	return nil, processor.ErrNotFound
}

// objectID is the id of the object an event is about.
func objectID(ev *stripego.Event) string {
	id, _ := ev.Data.Object["id"].(string)
	return id
}

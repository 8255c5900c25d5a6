// Package iso8583 connects Kassa to an acquirer's host over ISO 8583 (1987, ASCII), speaking Kassa's
// acquirer profile (acquirer-iso8583.md, quoted as "the profile"): authorizations and sales (0100,
// 0200), captures (0220), refunds (0200 with processing code 200000), voids and timeout reversals
// (0400), over one persistent connection per host shared by the merchants on it, with sign-on, echo
// tests and reconnection.
//
// ISO 8583 has no enquiry: a request that gets no answer is undone by a reversal that names it (field
// 90), never asked about. Every message's STAN, transmission time and RRN are therefore fixed before
// it is sent (Prepare, recorded by the payments core with the attempt), so that the reversal can be
// built after a crash; an unanswered call returns a *processor.Unanswered carrying that reversal.
package iso8583

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	moov "github.com/moov-io/iso8583"

	"github.com/kassapay/kassa/internal/processor"
)

// Processor is an account at an acquirer host: the terminal (field 41) and card acceptor (field 42)
// its messages carry, and the host's shared connection.
type Processor struct {
	host    *host
	account account
	now     func() time.Time
	stans   *series // the terminal's STANs
	rrns    *series // the acquirer's RRNs
}

var (
	_ processor.Processor = (*Processor)(nil)
	_ processor.Preparer  = (*Processor)(nil)
	_ processor.Reverser  = (*Processor)(nil)
)

// Prepare allocates the STAN, transmission time and RRN of the account's next message (see trace). It
// writes to the database once per block of numbers, not per call.
func (p *Processor) Prepare(ctx context.Context, _ processor.Merchant) (string, error) {
	t, err := p.allocate(ctx)
	if err != nil {
		return "", err
	}
	return t.String(), nil
}

func (p *Processor) allocate(ctx context.Context) (trace, error) {
	stan, err := p.stans.take(ctx)
	if err != nil {
		return trace{}, err
	}
	rrn, err := p.rrns.take(ctx)
	if err != nil {
		return trace{}, err
	}
	return trace{stan: stanOf(stan), at: p.now().UTC().Truncate(time.Second), rrn: rrnOf(rrn)}, nil
}

// traceOf is the trace the payments core prepared, or a new one for a caller that prepared none.
func (p *Processor) traceOf(ctx context.Context, prepared string) (trace, error) {
	if prepared == "" {
		return p.allocate(ctx)
	}
	return parseTrace(prepared)
}

// Authorize sends a 0100 (an authorization; of zero: a card verification) or, for a sale, a 0200.
func (p *Processor) Authorize(ctx context.Context, pay processor.Payment) (processor.Result, error) {
	t, err := p.traceOf(ctx, pay.Trace)
	if err != nil {
		return processor.Result{}, err
	}
	o := sent{mti: "0100", trace: t, amount: pay.Amount, currency: pay.Currency.Numeric(), reference: pay.Reference}
	if pay.Capture {
		o.mti = "0200"
	}
	loc := pay.Merchant.Location
	if loc == nil {
		loc = time.UTC // the merchant's local time when Kassa knows its time zone; UTC otherwise
	}
	local := t.at.In(loc)
	f := p.fields(o)
	f[2] = pay.Card.Digits()
	f[3] = "000000"
	f[12] = local.Format("150405")
	f[13] = local.Format("0102")
	f[14] = fmt.Sprintf("%02d%02d", pay.Expiry.Year%100, pay.Expiry.Month)
	// 22, POS entry mode: "010 keyed, 100 card on file".
	f[22] = "010"
	if pay.StoredCard {
		f[22] = "100"
	}
	// 25, POS condition: "59 e-commerce, 08 mail/telephone order, 02 recurring".
	switch {
	case pay.Recurring:
		f[25] = "02"
	case pay.MailOrder:
		f[25] = "08"
	default:
		f[25] = "59"
	}
	f[48] = additionalData(pay) // left out when empty
	return p.exchange(ctx, o, &f)
}

// additionalData is field 48: "tag-length-value: 2-letter tag, 2-digit length, value; CV = CVV2
// (omitted when none, e.g. a stored card), AU = 3-D Secure outcome (Y authenticated, N failed)". A
// payment with neither leaves field 48 out rather than send it empty.
func additionalData(pay processor.Payment) string {
	var s string
	if pay.CVV != "" {
		s += fmt.Sprintf("CV%02d%s", len(pay.CVV), pay.CVV)
	}
	switch pay.Authentication {
	case processor.AuthenticationSucceeded:
		s += "AU01Y"
	case processor.AuthenticationFailed:
		s += "AU01N"
	}
	return s
}

// Capture sends a 0220 for f.Amount of the authorization f.Original.
func (p *Processor) Capture(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	return p.followUp(ctx, f, "0220", "000000", "0100")
}

// Refund sends a 0200 with processing code 200000 for f.Amount of the sale or capture f.Original.
func (p *Processor) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	return p.followUp(ctx, f, "0200", "200000", "0200", "0220")
}

// Void sends a 0400 for the authorization f.Original, with its amount. A void that gets no answer is
// not reversed (a 0400 is not undone by another): it is repeated, as every 0400 is, until the host
// answers.
func (p *Processor) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	return p.followUp(ctx, f, "0400", "", "0100")
}

// followUp sends a message of type mti (with processing code, when not "") acting on f.Original,
// which must be a message of one of the types of.
func (p *Processor) followUp(ctx context.Context, f processor.FollowUp, mti, processing string, of ...string) (processor.Result, error) {
	orig, err := parseReference(f.Original)
	if err != nil {
		return processor.Result{}, err
	}
	if !slices.Contains(of, orig.mti) {
		return processor.Result{}, fmt.Errorf("iso8583: a %s cannot act on a %s", mti, orig.mti)
	}
	t, err := p.traceOf(ctx, f.Trace)
	if err != nil {
		return processor.Result{}, err
	}
	o := sent{mti: mti, trace: t, amount: f.Amount, currency: f.Currency.Numeric(), reference: f.Reference,
		original: orig.mti + orig.stan + orig.f7}
	if mti == "0400" {
		o.amount = orig.amount // "0400 with 4 (the original amount)"
	}
	fs := p.fields(o)
	if processing != "" {
		fs[3] = processing
	}
	fs[90] = orig.f90(p.account.acquirerID)
	return p.exchange(ctx, o, &fs)
}

// Lookup cannot ask the host (ISO 8583 has no enquiry): for an operation it may have received, it
// answers a *processor.Unanswered whose reversal undoes it, which the payments core records and
// sends. An operation without a trace was never sent (the core records the trace before sending);
// neither is a void looked up as sent: its 0400 cannot be rebuilt from op (it names the authorization,
// which op does not carry), and a void repeated later by the merchant does what the lost one would
// have (a host that already released the hold answers 25, which a void takes as done).
func (p *Processor) Lookup(ctx context.Context, op processor.Operation) (processor.Result, error) {
	if op.Trace == "" || op.Kind == processor.OperationVoid {
		return processor.Result{}, processor.ErrNotFound
	}
	t, err := parseTrace(op.Trace)
	if err != nil {
		return processor.Result{}, err
	}
	mti, ok := map[string]string{processor.OperationAuthorization: "0100", processor.OperationSale: "0200",
		processor.OperationCapture: "0220", processor.OperationRefund: "0200"}[op.Kind]
	if !ok {
		return processor.Result{}, fmt.Errorf("iso8583: lookup of an operation of kind %q", op.Kind)
	}
	o := sent{mti: mti, trace: t, amount: op.Amount, currency: op.Currency.Numeric(), reference: op.Reference}
	return processor.Result{}, p.unanswered(ctx, o, errors.New("ISO 8583 has no enquiry: the operation is reversed"))
}

// Reverse sends a reversal that an Unanswered error described: the same 0400 every time (fields 7 and
// 11 unchanged: the host takes it for a retransmission). It returns nil when the host answers 0410
// with 00 (the original is undone) or 25 (the host never received it).
func (p *Processor) Reverse(ctx context.Context, _ processor.Merchant, s string) error {
	r, err := parseReversal(s)
	if err != nil {
		return err
	}
	msg, err := p.message("0400", &fields{4: strconv.FormatInt(r.Amount, 10), 7: r.F7, 11: r.STAN, 37: r.RRN,
		41: p.account.terminalID, 42: p.account.merchantID, 49: r.Currency, 62: r.Reference,
		90: r.Original + fmt.Sprintf("%011s", p.account.acquirerID) + "00000000000"})
	if err != nil {
		return err
	}
	resp, err := p.host.send(ctx, msg, p.account.timeout)
	if err != nil {
		return fmt.Errorf("iso8583: reversal %s not acknowledged: %w", r.STAN, err)
	}
	switch code, _ := resp.GetString(39); code {
	case "00", "25":
		return nil
	default:
		return fmt.Errorf("iso8583: reversal %s answered with response code %q", r.STAN, code)
	}
}

// sent is a financial message: what its reference, its decision and its reversal are made of.
type sent struct {
	mti       string
	trace     trace
	amount    int64
	currency  string // ISO 4217 numeric
	reference string // Kassa's (field 62)
	original  string // what field 90 names (MTI, STAN, field 7), for a follow-up
}

// fields are the fields every financial message of o carries: 4, 7, 11, 37, 41, 42, 49 and 62.
func (p *Processor) fields(o sent) fields {
	return fields{4: strconv.FormatInt(o.amount, 10), 7: o.trace.f7(), 11: o.trace.stan, 37: o.trace.rrn,
		41: p.account.terminalID, 42: p.account.merchantID, 49: o.currency, 62: o.reference}
}

func (p *Processor) message(mti string, f *fields) (*moov.Message, error) {
	msg := moov.NewMessage(Spec)
	msg.MTI(mti)
	return msg, setFields(msg, f)
}

// exchange sends o and turns the host's answer into a Result; no answer into a *processor.Unanswered.
func (p *Processor) exchange(ctx context.Context, o sent, f *fields) (processor.Result, error) {
	msg, err := p.message(o.mti, f)
	if err != nil {
		return processor.Result{}, err
	}
	resp, err := p.host.send(ctx, msg, p.account.timeout)
	var na *noAnswer
	if errors.As(err, &na) {
		return processor.Result{}, p.unanswered(ctx, o, na)
	}
	if err != nil {
		return processor.Result{}, err
	}
	code, _ := resp.GetString(39)
	auth, _ := resp.GetString(38)
	ref := reference{mti: o.mti, stan: o.trace.stan, f7: o.trace.f7(), rrn: o.trace.rrn, amount: o.amount, auth: auth}.String()
	return o.decide(code, ref), nil
}

// unanswered is the *processor.Unanswered of o: a reversal with its own STAN, field 7 and RRN,
// allocated now and fixed, naming o in field 90. A void's reversal is the void itself, repeated.
func (p *Processor) unanswered(ctx context.Context, o sent, why error) error {
	r := reversal{Amount: o.amount, Currency: o.currency, Reference: o.reference, Original: o.mti + o.trace.stan + o.trace.f7()}
	t := o.trace
	if o.mti == "0400" {
		r.Original = o.original
	} else {
		var err error
		// The caller may have gone (its context ended): the reversal is allocated all the same. When
		// it cannot be (the database is down), the error is a plain one, an unknown outcome: the
		// payments core keeps the attempt pending, and Lookup makes the reversal later.
		if t, err = p.allocate(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("iso8583: %w; and no reversal could be allocated: %w", why, err)
		}
	}
	r.STAN, r.F7, r.RRN = t.stan, t.f7(), t.rrn
	return &processor.Unanswered{Reversal: r.String(), Completes: o.mti == "0400", Err: why}
}

// declines maps the profile's response codes (field 39) to Kassa's decline codes and a human message.
var declines = map[string]processor.Result{
	"05": {Code: processor.CodeDeclined, Message: "Do not honour"},
	"14": {Code: processor.CodeDeclined, Message: "Invalid card number"},
	"12": {Code: processor.CodeDeclined, Message: "Invalid transaction"},
	"13": {Code: processor.CodeDeclined, Message: "Invalid amount"},
	"41": {Code: processor.CodeLostCard, Message: "Lost card"},
	"43": {Code: processor.CodeStolenCard, Message: "Stolen card"},
	"51": {Code: processor.CodeInsufficientFunds, Message: "Insufficient funds"},
	"54": {Code: processor.CodeExpiredCard, Message: "Expired card"},
	"N7": {Code: processor.CodeIncorrectCVC, Message: "CVV2 mismatch"},
	"91": {Code: processor.CodeProcessingError, Message: "Issuer unavailable"},
	"96": {Code: processor.CodeProcessingError, Message: "System malfunction"},
}

// decide is the Result of the host's answer to o, with response code code; ref is o's reference.
func (o sent) decide(code, ref string) processor.Result {
	switch {
	case code == "00":
		return processor.Result{Approved: true, Message: "Approved", Reference: ref}
	case code == "25" && o.mti == "0400":
		// "Unable to locate original" to a void: the host holds no such authorization, so nothing is
		// held any more, which is what the void asks for.
		return processor.Result{Approved: true, Message: "Approved", Reference: ref}
	case code == "25" && o.original != "":
		// To a capture or refund: the host does not know what it acts on. Nothing about the card; the
		// operation did not happen.
		return processor.Result{Code: processor.CodeProcessingError, Message: "Original transaction not found at the acquirer", Reference: ref}
	}
	if d, ok := declines[code]; ok {
		d.Reference = ref
		return d
	}
	// A code the profile does not list is a refusal, never an approval.
	return processor.Result{Code: processor.CodeDeclined, Message: "Declined (response code " + code + ")", Reference: ref}
}

package acquirer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Entry is one line of the journal: a request the host received and its answer. Card data is kept
// as PCI DSS 3.3 and 3.4 allow: the first six and last four digits of the PAN, whether a CVV2 came
// (never the CVV2 itself).
type Entry struct {
	ID             int64     `json:"id"`
	ReceivedAt     time.Time `json:"received_at"`
	MTI            string    `json:"mti"`
	ProcessingCode string    `json:"processing_code"` // field 3
	FunctionCode   string    `json:"function_code"`   // field 24, network management
	STAN           string    `json:"stan"`            // field 11
	Transmission   string    `json:"transmission"`    // field 7, MMDDhhmmss UTC
	RRN            string    `json:"rrn"`             // field 37
	TerminalID     string    `json:"terminal_id"`     // field 41
	MerchantID     string    `json:"merchant_id"`     // field 42
	Reference      string    `json:"reference"`       // field 62
	Amount         int64     `json:"amount"`          // field 4, minor units
	Currency       string    `json:"currency"`        // field 49
	EntryMode      string    `json:"pos_entry_mode"`  // field 22
	Condition      string    `json:"pos_condition"`   // field 25
	CVV2           bool      `json:"cvv2"`            // field 48 carried CV
	AU             string    `json:"au"`              // field 48's 3-D Secure outcome
	PANFirst6      string    `json:"pan_first6"`
	PANLast4       string    `json:"pan_last4"`
	Original       string    `json:"original"`      // field 90
	ResponseCode   string    `json:"response_code"` // field 39 of the answer
	AuthCode       string    `json:"auth_code"`     // field 38 of the answer
	// Reversed is true once a 0400 has undone the operation (or came before it).
	Reversed bool `json:"reversed"`
	// ApprovalDay is the UTC day of an approved 0100, 0200 or 0220, "" for anything else: the day
	// of the settlement report that lists it.
	ApprovalDay string `json:"approval_day"`
	Status      string `json:"status"`
	// Dropped is true when the answer was decided and journaled but never sent (the drop rate).
	Dropped bool `json:"dropped"`
	// Note says why the host answered as it did when the card is not the reason.
	Note string `json:"note"`
}

// Statuses of an Entry.
const (
	// StatusProcessed is a request decided by the profile's rules.
	StatusProcessed = "processed"
	// StatusRetransmission is a request repeating fields 7, 11 and 41 of a processed one: it got the
	// first answer again and did nothing.
	StatusRetransmission = "retransmission"
	// StatusRefused is a request answered without being processed: no sign-on on its connection, a
	// STAN reused for another message, no fields 7, 11 and 41 to know it by, or a journal that failed.
	StatusRefused = "refused"
)

// Response codes (field 39) of the profile, and 30 for a message that breaks it.
const (
	codeApproved           = "00"
	codeDoNotHonour        = "05"
	codeInvalidTransaction = "12"
	codeInvalidAmount      = "13"
	codeInvalidCard        = "14"
	codeNoOriginal         = "25"
	codeFormatError        = "30"
	codeExpiredCard        = "54"
	codeIssuerUnavailable  = "91"
	codeMalfunction        = "96"
)

// testCards are the profile's declining test cards; any other valid card approves.
var testCards = map[string]string{
	"4000000000000002": codeDoNotHonour,
	"4000000000009995": "51", // insufficient funds
	"4000000000000069": codeExpiredCard,
	"4000000000000127": "N7", // CVV2 mismatch
	"4000000000009987": "41", // lost card
	"4000000000009979": "43", // stolen card
	"4000000000000119": codeMalfunction,
}

// key names a message of a terminal on a day: field 41, field 11 and the date (MMDD, UTC) of field 7.
// The profile makes a STAN "unique per terminal ... per day".
type key struct{ tid, stan, date string }

func keyOf(e *Entry) key { return key{e.TerminalID, e.STAN, e.Transmission[:4]} }

// sameDate is how far apart two messages of one key may be received and still be of the same day:
// field 7 has no year, so the same date a year later is another day.
const sameDate = 48 * time.Hour

// op is a processed message as the book remembers it: its answer, for retransmissions, and what later
// messages may still do to it.
type op struct {
	id           int64
	received     time.Time
	transmission string // field 7
	mti          string
	proc         string
	mid          string
	amount       int64
	currency     string
	code         string
	authCode     string
	reversed     bool
	parent       *op   // the authorization of a capture; the sale or capture of a refund
	captured     bool  // an authorization with an approved capture not reversed
	refunded     int64 // a sale or capture: its approved refunds not reversed
}

func (o *op) approved() bool { return o.code == codeApproved }

// book is the host's state: every processed message by key, the originals that a reversal named
// before they arrived, and the journal entries of each reference. It is a fold of the journal, rebuilt
// from it at start. Not safe for concurrent use.
type book struct {
	ops   map[key]*op
	early map[key]string // the key of an original reversed before it arrived → its MTI and field 7
	// refs are the journal ids of the entries of each reference (field 62), in order: GET /journal's
	// index. An index in the journal's database would cost more than the rest of the journal: Kassa's
	// references are random, so each row would write a page of its own to it.
	refs map[string][]int64
}

func newBook() *book {
	return &book{ops: map[key]*op{}, early: map[key]string{}, refs: map[string][]int64{}}
}

// entries returns the journal ids of the entries of reference ref, in order.
func (b *book) entries(ref string) []int64 { return slices.Clone(b.refs[ref]) }

// decide answers r into e (its ResponseCode, AuthCode, Status, Note, Reversed, ApprovalDay), by the
// profile's rules and the book, without changing the book: apply does that.
func (b *book) decide(r *request, e *Entry, s *session, now time.Time) {
	e.Status = StatusProcessed
	if r.mti == mtiNetwork {
		if e.ResponseCode, e.Note = codeApproved, r.problem; r.problem != "" {
			e.ResponseCode = codeFormatError
		} else if e.FunctionCode != "301" { // 001 sign-on, 002 sign-off; an echo changes nothing
			s.signedOn = e.FunctionCode == "001"
		}
		return
	}
	refuse := func(code, note string) { e.Status, e.ResponseCode, e.Note = StatusRefused, code, note }
	// The profile: "sign-on after every connect". Nothing but network management is processed on a
	// connection that has not signed on (or has signed off).
	if !s.signedOn {
		refuse(codeIssuerUnavailable, "no sign-on on this connection")
		return
	}
	if !digits(e.STAN, 6) || !digits(e.Transmission, 10) || strings.TrimSpace(e.TerminalID) == "" {
		refuse(codeFormatError, "no fields 7, 11 and 41 to know the message by")
		return
	}
	// "A request that repeats fields 7, 11 and 41 of one it already answered is a retransmission: the
	// host answers it again with the first answer and does nothing twice."
	if prev := b.ops[keyOf(e)]; prev != nil && now.Sub(prev.received) < sameDate {
		if prev.transmission != e.Transmission || prev.mti != e.MTI || prev.proc != e.ProcessingCode {
			refuse(codeInvalidTransaction, fmt.Sprintf("STAN reused: entry %d, a %s sent at %s, has it today",
				prev.id, prev.mti, prev.transmission))
			return
		}
		e.Status, e.ResponseCode, e.AuthCode = StatusRetransmission, prev.code, prev.authCode
		e.Note = fmt.Sprintf("retransmission of entry %d", prev.id)
		return
	}
	e.ResponseCode, e.Note = b.rule(r, e, now)
	if e.ResponseCode == codeApproved && (e.MTI == mtiAuthorization || e.MTI == mtiFinancial || e.MTI == mtiCapture) {
		e.AuthCode = authCode()
		e.ApprovalDay = now.UTC().Format(time.DateOnly)
	}
}

// rule is the response code of a new request, and a note when the card is not the reason.
func (b *book) rule(r *request, e *Entry, now time.Time) (code, note string) {
	if r.problem != "" {
		return codeFormatError, r.problem
	}
	if b.early[keyOf(e)] == e.MTI+e.Transmission {
		e.Reversed = true
		return codeInvalidTransaction, "reversed before it arrived"
	}
	orig := b.original(e)
	switch {
	case (e.MTI == mtiAuthorization || e.MTI == mtiFinancial) && e.ProcessingCode == procPurchase:
		return purchase(r, e, now)
	case e.MTI == mtiFinancial && e.ProcessingCode == procRefund:
		return refund(e, orig)
	case e.MTI == mtiCapture && e.ProcessingCode == procPurchase:
		return capture(e, orig)
	case e.MTI == mtiReversal:
		return reversal(e, orig)
	}
	return codeInvalidTransaction, "not a message of the profile"
}

func purchase(r *request, e *Entry, now time.Time) (code, note string) {
	switch {
	case !r.pan.Valid():
		return codeInvalidCard, ""
	case r.expiry.Expired(now):
		return codeExpiredCard, ""
	case r.au == "N":
		return codeDoNotHonour, "3-D Secure failed"
	case e.MTI == mtiFinancial && e.Amount == 0: // "an amount of zero is a card verification": of an 0100
		return codeInvalidAmount, "a sale of zero"
	}
	if code, ok := testCards[r.pan.Digits()]; ok {
		return code, ""
	}
	return codeApproved, ""
}

// capture: "one capture per authorization", of "at most the authorized" amount.
func capture(e *Entry, auth *op) (code, note string) {
	switch {
	case auth == nil:
		return codeNoOriginal, ""
	case auth.mti != mtiAuthorization || !auth.approved() || auth.reversed:
		return codeInvalidTransaction, "the original is not an authorization in effect"
	case auth.captured:
		return codeInvalidTransaction, "the authorization is already captured"
	case e.Currency != auth.currency:
		return codeInvalidTransaction, "not the authorization's currency"
	case e.Amount <= 0 || e.Amount > auth.amount:
		return codeInvalidAmount, "more than authorized"
	}
	return codeApproved, ""
}

// refund: of a sale or a capture, "the host refuses more than was captured (39 13)".
func refund(e *Entry, paid *op) (code, note string) {
	switch {
	case paid == nil:
		return codeNoOriginal, ""
	case !(paid.mti == mtiFinancial && paid.proc == procPurchase || paid.mti == mtiCapture) || !paid.approved() || paid.reversed:
		return codeInvalidTransaction, "the original is not a sale or capture in effect"
	case e.Currency != paid.currency:
		return codeInvalidTransaction, "not the original's currency"
	case e.Amount <= 0 || paid.refunded+e.Amount > paid.amount:
		return codeInvalidAmount, "more than was captured"
	}
	return codeApproved, ""
}

// reversal: a void of an authorization or a timeout reversal of an 0100, 0200 or 0220.
func reversal(e *Entry, orig *op) (code, note string) {
	switch {
	case orig == nil:
		return codeNoOriginal, ""
	case orig.mti != mtiAuthorization && orig.mti != mtiFinancial && orig.mti != mtiCapture:
		return codeInvalidTransaction, "the original is not an 0100, 0200 or 0220"
	case orig.reversed:
		return codeApproved, "already reversed"
	case e.Amount != orig.amount:
		return codeInvalidAmount, "not the original's amount"
	case e.Currency != orig.currency:
		return codeInvalidTransaction, "not the original's currency"
	case orig.captured:
		return codeInvalidTransaction, "the authorization is captured"
	case orig.refunded > 0:
		return codeInvalidTransaction, "the original is refunded"
	}
	return codeApproved, ""
}

// original is the processed message that field 90 of e names, sent by the same terminal and merchant;
// nil when there is none.
func (b *book) original(e *Entry) *op {
	k, name := originalKey(e)
	o := b.ops[k]
	if o == nil || o.mti+o.transmission != name || o.mid != e.MerchantID {
		return nil
	}
	return o
}

// originalKey is the key of the message field 90 names, and its MTI and field 7 run together:
// "original MTI (4) + original STAN (6) + original field 7 (10) + acquirer id (11) + forwarding id
// (11)". The message came from e's terminal.
func originalKey(e *Entry) (key, string) {
	if len(e.Original) < 20 {
		return key{}, ""
	}
	o := e.Original
	return key{e.TerminalID, o[4:10], o[10:14]}, o[:4] + o[10:20]
}

// apply records a decided entry in the book: it is listed under its reference, a processed one is
// kept for retransmissions, and an approved one acts on its original. It returns the journal id of the entry that e reverses now, or
// 0. The journal is replayed through apply at start.
func (b *book) apply(e *Entry) (reverses int64) {
	if e.Reference != "" {
		b.refs[e.Reference] = append(b.refs[e.Reference], e.ID)
	}
	if e.Status != StatusProcessed || e.MTI == mtiNetwork {
		return 0
	}
	k := keyOf(e)
	o := &op{id: e.ID, received: e.ReceivedAt, transmission: e.Transmission, mti: e.MTI, proc: e.ProcessingCode,
		mid: e.MerchantID, amount: e.Amount, currency: e.Currency, code: e.ResponseCode, authCode: e.AuthCode,
		reversed: e.Reversed}
	b.ops[k] = o
	delete(b.early, k)
	orig := b.original(e)
	switch {
	case e.MTI == mtiReversal && e.ResponseCode == codeNoOriginal:
		// The original may still arrive: it is refused then, having been reversed.
		ok, name := originalKey(e)
		b.early[ok] = name
	case !o.approved() || orig == nil:
	case e.MTI == mtiCapture:
		o.parent, orig.captured = orig, true
	case e.MTI == mtiFinancial && e.ProcessingCode == procRefund:
		o.parent, orig.refunded = orig, orig.refunded+e.Amount
	case e.MTI == mtiReversal && !orig.reversed:
		orig.reversed = true
		if p := orig.parent; p != nil && orig.approved() {
			if orig.mti == mtiCapture {
				p.captured = false
			} else {
				p.refunded -= orig.amount
			}
		}
		return orig.id
	}
	return 0
}

// authCode is a fresh authorization code: six characters (field 38).
func authCode() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
	b := make([]byte, 6)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

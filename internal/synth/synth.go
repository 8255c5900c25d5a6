// Package synth fills a merchant's ledger with a synthetic but realistic history, fast, for the
// dashboard's benchmark, which loads 1,000,000 transactions for one merchant by a fast bulk path.
// It writes through the real schema (the migrations applied)
// in large batches — multi-row INSERTs inside transactions on SQLite, COPY on PostgreSQL — rows as the
// ledger leaves them once final: sales, authorizations with their captures or voids, refunds of part
// of the sales and captures, and declines with the simulator's codes and messages; the audit record
// of each; and the merchant's vault customers, whose e-mails and names the transactions carry.
//
// Rows are in increasing id order of time, every follow-up after its parent, and a parent's state
// (reserved, closed_by) is what its follow-ups made it, so that the ledger's own rules (a refund up
// to what remains, one capture or void per authorization) hold on the loaded data. The history is
// a function of Options.Seed.
package synth

import (
	"container/heap"
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
)

// Options describe the history to load.
type Options struct {
	MerchantID string
	// ClientID is the API client recorded as having made the transactions (the merchant's).
	ClientID string
	// Transactions is the number of ledger rows, follow-ups included.
	Transactions int
	// Customers is the number of vault customers, and of the people the transactions are made by.
	Customers int
	// Span is how far back the history goes from End (default 90 days); End defaults to now.
	Span time.Duration
	End  time.Time
	// Location is the time zone of Summary.PerDay's days (default UTC).
	Location *time.Location
	Seed     uint64
}

// Summary is what was loaded.
type Summary struct {
	Transactions, Customers int
	Kinds                   map[string]int // rows per kind
	Declined                int
	// PerDay counts the rows created on each day ("2006-01-02") of Options.Location.
	PerDay map[string]int
	// Samples of the loaded data, to query with: transaction ids (of every kind), the e-mails and
	// last four digits the transactions carry, and vault customers' lookup ids.
	TransactionIDs, Emails, CardSuffixes, CustomerLookups []string
	// Amounts samples the transactions' amounts, as decimals of the major unit ("42.17"; every
	// currency of the history has two decimals).
	Amounts []string
}

// sampleSize bounds each sample of Summary.
const sampleSize = 1000

// batchRows is how many rows go to the database at once.
const batchRows = 50000

// Load writes the history of o into db, then has the database analyze its tables so that plans
// match the data. The merchant must exist; its ledger may hold rows already (ids continue).
func Load(ctx context.Context, db *store.DB, o Options) (Summary, error) {
	if o.MerchantID == "" || o.Transactions < 0 || o.Customers < 1 {
		return Summary{}, errors.New("synth: a merchant and at least one customer are needed")
	}
	if o.Span <= 0 {
		o.Span = 90 * 24 * time.Hour
	}
	if o.End.IsZero() {
		o.End = time.Now()
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	w, err := newWriter(ctx, db)
	if err != nil {
		return Summary{}, err
	}
	defer w.close()
	indexes, err := w.dropIndexes(ctx)
	if err != nil {
		return Summary{}, err
	}
	g := newGenerator(o)
	sum := Summary{Kinds: map[string]int{}, PerDay: map[string]int{}}
	for i := range o.Customers {
		c := g.customer(i)
		if err := w.add(ctx, customers, []any{c.lookup, o.MerchantID, c.email, c.first, c.last, c.city, c.country, c.postal,
			g.customersSince, g.customersSince}); err != nil {
			return Summary{}, err
		}
		g.sample(&sum.CustomerLookups, i, c.lookup)
	}
	var first int64
	if err := db.Raw().QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM transactions`).Scan(&first); err != nil {
		return Summary{}, err
	}
	place, err := firstPlace(ctx, db, o.MerchantID)
	if err != nil {
		return Summary{}, err
	}
	n := 0
	err = g.run(first, func(r *row) error {
		c := g.customer(r.customer)
		if err := w.add(ctx, transactions, []any{r.id, r.txid, o.MerchantID, r.kind, nullInt(r.parent), r.status, r.amount,
			r.currency, int64(2), r.reserved, nullStr(r.closedBy), r.message, nullStr(r.declineCode), "sim_" + r.txid,
			r.card.brand, r.card.prefix, r.card.suffix, r.test, r.source, c.email, c.first, c.last, nullStr(r.orderID),
			nullStr(o.ClientID), r.requestID, r.created, r.updated, nullStr(r.parentTxid), place + int64(n), r.finished}); err != nil {
			return err
		}
		g.sample(&sum.TransactionIDs, n, r.txid)
		g.sample(&sum.Emails, n, c.email)
		g.sample(&sum.CardSuffixes, n, r.card.suffix)
		g.sample(&sum.Amounts, n, fmt.Sprintf("%d.%02d", r.amount/100, r.amount%100))
		n++
		sum.Kinds[r.kind]++
		if r.status == "DECLINED" {
			sum.Declined++
		}
		sum.PerDay[time.UnixMilli(r.created).In(o.Location).Format(time.DateOnly)]++
		return nil
	})
	if err == nil {
		err = w.flush(ctx)
	}
	if err == nil {
		err = w.buildIndexes(ctx, indexes)
	}
	if err != nil {
		return Summary{}, err
	}
	sum.Transactions, sum.Customers = n, o.Customers
	return sum, w.finish(ctx, place+int64(n))
}

// firstPlace is the place in commit order of the first loaded row: above every place the merchant's
// rows hold (on SQLite those of every source of its events, event.Place), and on PostgreSQL at or
// above the place of the next transaction to begin (store.XmaxSQL).
func firstPlace(ctx context.Context, db *store.DB, merchantID string) (int64, error) {
	q := `SELECT ` + event.Place(store.SQLite, "$1")
	if db.Dialect() == store.Postgres {
		q = `SELECT GREATEST(` + store.XmaxSQL + `, (SELECT COALESCE(MAX(event_seq), 0) + 1 FROM transactions WHERE merchant_id = $1))`
	}
	var place int64
	err := db.Raw().QueryRowContext(ctx, q, merchantID).Scan(&place)
	return place, err
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// row is one ledger row being generated.
type row struct {
	id, parent                               int64
	txid, parentTxid, kind, status, currency string
	amount, reserved                         int64
	closedBy, message, declineCode, orderID  string
	source, requestID                        string
	card                                     card
	test                                     bool
	customer                                 int
	created, finished, updated               int64  // epoch ms
	children                                 []*row // follow-ups, emitted once this row has its id
	seq                                      int    // emission order among rows of equal time
}

type card struct{ brand, prefix, suffix string }

type person struct {
	lookup, email, first, last, city, country, postal string
}

// shape is what becomes of a sale or authorization: its outcome and its follow-ups.
type shape uint8

const (
	declinedSale shape = iota
	sale
	saleRefunded        // one refund, full or partial
	saleRefundedTwice   // two partial refunds
	declinedAuth        // declined authorization
	openAuth            // approved, neither captured nor voided yet
	captured            // captured, in full or in part
	capturedAndRefunded // captured, then the capture refunded
	voided
)

// rows is how many ledger rows a shape makes.
var rows = [...]int{declinedSale: 1, sale: 1, saleRefunded: 2, saleRefundedTwice: 3, declinedAuth: 1, openAuth: 1, captured: 2,
	capturedAndRefunded: 3, voided: 2}

// generator makes the history: shapes first (so that the row count is exact), then the rows.
type generator struct {
	o              Options
	shapes         []shape
	shapeRNG, rng  *rand.Rand
	customersSince int64 // when the vault customers were created: before the first transaction
	seq            int
}

func newGenerator(o Options) *generator {
	g := &generator{o: o, shapeRNG: rand.New(rand.NewPCG(o.Seed, 1)), rng: rand.New(rand.NewPCG(o.Seed, 2))}
	for total := 0; total < o.Transactions; {
		s := g.pickShape()
		if total+rows[s] > o.Transactions {
			s = sale // the last one fits exactly
		}
		g.shapes = append(g.shapes, s)
		total += rows[s]
	}
	g.customersSince = o.End.Add(-o.Span - time.Hour).UnixMilli()
	return g
}

// pickShape draws the mix: about 84 % of payments are sales and 16 % authorizations, 10 % of each
// declined; 8.5 % of approved sales are refunded (some twice); of approved authorizations 78 % are
// captured (5 % of those refunded later), 15 % voided and 7 % still open. Sales come out at about 69 %
// of the rows, declines at about 8 %.
func (g *generator) pickShape() shape {
	r := g.shapeRNG
	isSale, declined := r.Float64() < 0.84, r.Float64() < 0.10
	switch u := r.Float64(); {
	case isSale && declined:
		return declinedSale
	case isSale && u < 0.07:
		return saleRefunded
	case isSale && u < 0.085:
		return saleRefundedTwice
	case isSale:
		return sale
	case declined:
		return declinedAuth
	case u < 0.78*0.95:
		return captured
	case u < 0.78:
		return capturedAndRefunded
	case u < 0.93:
		return voided
	default:
		return openAuth
	}
}

var (
	firstNames = []string{"Olivia", "Liam", "Emma", "Noah", "Charlotte", "Oliver", "Amelia", "William", "Sophia", "Benjamin",
		"Chloé", "Lucas", "Mia", "Ethan", "Zoé", "Jacob", "Aaliyah", "Mohammed", "Priya", "Wei", "Hiroshi", "Ana", "Mateo",
		"Fatima", "Jean-François", "Siobhan", "Raj", "Ingrid", "Kofi", "Leila", "Dmitri", "Ava", "Isaac", "Nora", "Élise",
		"Tariq", "Hannah", "Oscar", "Yuki", "Camille"}
	lastNames = []string{"Smith", "Tremblay", "Wong", "Martin", "Roy", "Gagnon", "Lee", "Brown", "Wilson", "Côté", "Singh",
		"Patel", "Nguyen", "MacDonald", "Campbell", "Anderson", "Taylor", "Bouchard", "Chen", "Kim", "O'Brien", "García",
		"Müller", "Kowalski", "Haddad", "Okafor", "Dubois", "Morin", "Sato", "Rossi", "Fraser", "Johansson", "Lavoie",
		"Ahmed", "Murphy", "Leblanc", "Park", "Ferreira", "Novak", "Hughes"}
	domains = []string{"example.com", "example.org", "example.net", "mail.example", "post.example"}
	cities  = []struct{ city, country, postal string }{{"Toronto", "CA", "M5V 2T6"}, {"Montréal", "CA", "H2X 1Y4"},
		{"Vancouver", "CA", "V6B 1A1"}, {"Calgary", "CA", "T2P 1J9"}, {"Halifax", "CA", "B3H 1A1"}, {"Seattle", "US", "98101"},
		{"Boston", "US", "02108"}, {"Chicago", "US", "60601"}, {"Paris", "FR", "75002"}, {"Berlin", "DE", "10115"}}
	// bins are card prefixes (first six digits) by brand, as card_type names them.
	bins = []card{{"VISA", "424242", ""}, {"VISA", "450060", ""}, {"VISA", "451015", ""}, {"VISA", "453201", ""},
		{"MASTERCARD", "555555", ""}, {"MASTERCARD", "520082", ""}, {"MASTERCARD", "222300", ""},
		{"AMEX", "378282", ""}, {"AMEX", "371449", ""}, {"DISCOVER", "601111", ""}}
	// declines are the simulator's decline codes and messages, by how often they come.
	declines = []struct {
		code, message string
		weight        float64
	}{{"card_declined", "Declined", 0.50}, {"insufficient_funds", "Insufficient funds", 0.25},
		{"expired_card", "Expired card", 0.08}, {"incorrect_cvc", "Incorrect CVC", 0.08}, {"lost_card", "Lost card", 0.03},
		{"stolen_card", "Stolen card", 0.02}, {"processing_error", "Processing error", 0.04}}
)

var lookupEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// customer is the i-th person of the pool: the same for every call, as a function of the seed.
func (g *generator) customer(i int) person {
	h := rand.New(rand.NewPCG(g.o.Seed^0x5eed, uint64(i)))
	first, last := firstNames[h.IntN(len(firstNames))], lastNames[h.IntN(len(lastNames))]
	c := cities[h.IntN(len(cities))]
	var b [10]byte
	for j := range b {
		b[j] = byte(h.Uint32())
	}
	local := fmt.Sprintf("%s.%s%d", ascii(first), ascii(last), i)
	return person{lookup: lookupEncoding.EncodeToString(b[:])[:10], email: local + "@" + domains[i%len(domains)],
		first: first, last: last, city: c.city, country: c.country, postal: c.postal}
}

// cardOf is the card the i-th person pays with.
func (g *generator) cardOf(i int) card {
	h := rand.New(rand.NewPCG(g.o.Seed^0xca4d, uint64(i)))
	c := bins[h.IntN(len(bins))]
	c.suffix = fmt.Sprintf("%04d", h.IntN(10000))
	return c
}

// ascii lowers a name into an e-mail's local part: letters a to z, accents dropped, others left out.
func ascii(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			out = append(out, r)
		case r >= 'A' && r <= 'Z':
			out = append(out, r+'a'-'A')
		case r == 'é' || r == 'É':
			out = append(out, 'e')
		case r == 'ô':
			out = append(out, 'o')
		case r == 'í':
			out = append(out, 'i')
		case r == 'ü':
			out = append(out, 'u')
		}
	}
	return string(out)
}

// sample keeps a uniform sample of up to sampleSize of the values seen (reservoir sampling): v is
// the i-th value (from 0).
func (g *generator) sample(into *[]string, i int, v string) {
	if i < sampleSize {
		*into = append(*into, v)
	} else if j := g.rng.IntN(i + 1); j < sampleSize {
		(*into)[j] = v
	}
}

// run generates the rows in id order (from first) and hands each to emit.
func (g *generator) run(first int64, emit func(*row) error) error {
	start := g.o.End.Add(-g.o.Span).UnixMilli()
	end := g.o.End.UnixMilli()
	step := float64(end-start) / float64(max(len(g.shapes), 1))
	var pending followUps
	id := first
	out := func(r *row) error {
		r.id = id
		id++
		for _, c := range r.children {
			c.parent, c.parentTxid = r.id, r.txid
			g.seq++
			c.seq = g.seq
			heap.Push(&pending, c)
		}
		return emit(r)
	}
	for i, s := range g.shapes {
		at := start + int64(float64(i)*step+g.rng.Float64()*step/2)
		for pending.Len() > 0 && pending[0].created <= at {
			if err := out(heap.Pop(&pending).(*row)); err != nil {
				return err
			}
		}
		if err := out(g.payment(s, at, end)); err != nil {
			return err
		}
	}
	for pending.Len() > 0 {
		if err := out(heap.Pop(&pending).(*row)); err != nil {
			return err
		}
	}
	return nil
}

// payment makes the sale or authorization of shape s at time at, with its follow-ups (none of them
// later than end).
func (g *generator) payment(s shape, at, end int64) *row {
	r := g.rng
	who := int(float64(g.o.Customers) * r.Float64() * r.Float64()) // some customers buy far more often than others
	cur := "CAD"
	if u := r.Float64(); u < 0.3 {
		cur = "USD"
	} else if u < 0.4 {
		cur = "EUR"
	}
	source := "E_COMMERCE"
	if u := r.Float64(); u < 0.10 {
		source = "HPP"
	} else if u < 0.15 {
		source = "RECURRING"
	}
	p := &row{txid: g.txid(), kind: "SALE", status: "APPROVED", message: "Approved", currency: cur, customer: who,
		card: g.cardOf(who), test: r.Float64() < 0.05, source: source, requestID: g.requestID(), created: at,
		amount:  int64(math.Round(math.Exp(math.Log(500) + r.Float64()*math.Log(100)))), // 5.00 to 500.00, log-uniform
		orderID: fmt.Sprintf("ORD-%07d", r.IntN(10_000_000))}
	if r.Float64() < 0.2 {
		p.orderID = ""
	}
	p.finished = at + 200 + r.Int64N(1300)
	p.updated = p.finished
	if s >= declinedAuth {
		p.kind = "AUTHORIZATION"
	}
	if s == declinedSale || s == declinedAuth {
		p.status = "DECLINED"
		d := g.decline()
		p.declineCode, p.message = d.code, d.message
		return p
	}
	refund := func(parent *row, amount int64, earliest int64) *row {
		return g.followUp(parent, "REFUND", amount, g.later(earliest, 2*time.Hour, 30*24*time.Hour, end))
	}
	switch s {
	case saleRefunded:
		amount := p.amount
		if r.Float64() < 0.4 {
			amount = max(1, p.amount*int64(20+r.IntN(70))/100)
		}
		g.adopt(p, refund(p, amount, p.finished))
	case saleRefundedTwice:
		a := max(1, p.amount*int64(20+r.IntN(40))/100)
		b := max(1, (p.amount-a)*int64(30+r.IntN(70))/100)
		one := refund(p, a, p.finished)
		g.adopt(p, one)
		g.adopt(p, g.followUp(p, "REFUND", b, g.later(one.finished, time.Hour, 10*24*time.Hour, end)))
	case captured, capturedAndRefunded:
		amount := p.amount
		if r.Float64() < 0.3 {
			amount = max(1, p.amount*int64(50+r.IntN(50))/100)
		}
		c := g.followUp(p, "CAPTURE", amount, g.later(p.finished, 10*time.Minute, 72*time.Hour, end))
		p.closedBy = "CAPTURE"
		g.adopt(p, c)
		if s == capturedAndRefunded {
			g.adopt(c, refund(c, c.amount, c.finished))
		}
	case voided:
		p.closedBy = "VOID"
		g.adopt(p, g.followUp(p, "VOID", p.amount, g.later(p.finished, 5*time.Minute, 24*time.Hour, end)))
	}
	return p
}

// adopt makes c a follow-up of p: p reserves what c takes (a refund's amount from a sale or capture,
// a capture's amount from its authorization) and was last updated by it.
func (g *generator) adopt(p, c *row) {
	p.children = append(p.children, c)
	if c.kind == "REFUND" || c.kind == "CAPTURE" {
		p.reserved += c.amount
	}
	p.updated = max(p.updated, c.finished)
}

// followUp is a capture, refund or void of p, approved, at time at.
func (g *generator) followUp(p *row, kind string, amount, at int64) *row {
	c := &row{txid: g.txid(), kind: kind, status: "APPROVED", message: "Approved", currency: p.currency, amount: amount,
		customer: p.customer, card: p.card, test: p.test, source: p.source, orderID: p.orderID, requestID: g.requestID(),
		created: at, finished: at + 100 + g.rng.Int64N(700)}
	c.updated = c.finished
	return c
}

// later is a time between lo and hi after from, uniformly; if that would pass end, halfway between
// from and end instead, so that a follow-up of a recent payment still comes before end.
func (g *generator) later(from int64, lo, hi time.Duration, end int64) int64 {
	at := from + lo.Milliseconds() + g.rng.Int64N((hi - lo).Milliseconds())
	if at >= end {
		at = from + max(1, (end-from)/2)
	}
	return at
}

func (g *generator) decline() (d struct {
	code, message string
	weight        float64
}) {
	u := g.rng.Float64()
	for _, d = range declines {
		if u -= d.weight; u < 0 {
			return d
		}
	}
	return d
}

// txid is a transaction id as the ledger made them before they were in time order (sortid): 20 random
// characters [A-Z2-7], the ledger of an installation that has been running.
func (g *generator) txid() string {
	var b [13]byte
	for i := range b {
		b[i] = byte(g.rng.Uint32())
	}
	return lookupEncoding.EncodeToString(b[:])[:20]
}

func (g *generator) requestID() string { return fmt.Sprintf("%016x", g.rng.Uint64()) }

// followUps is a min-heap of rows waiting for their time, ordered by time, then by when they were made.
type followUps []*row

func (h followUps) Len() int { return len(h) }
func (h followUps) Less(i, j int) bool {
	return h[i].created < h[j].created || h[i].created == h[j].created && h[i].seq < h[j].seq
}
func (h followUps) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *followUps) Push(x any)   { *h = append(*h, x.(*row)) }
func (h *followUps) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

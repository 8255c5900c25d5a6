package reconcile_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/reconcile"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// day is the day reconciled.
var day = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// books is a ledger whose transactions are taken by the simulator and then attributed to the
// processor accounts they stand for: the ledger does not record the account itself yet.
type books struct {
	db     *store.DB
	clock  *clock.Manual
	ledger *payment.Ledger
	names  map[string]string // transaction_id → the test's name for it
	stan   int
}

func newBooks(t *testing.T, db *store.DB) *books {
	t.Helper()
	ctx := context.Background()
	b := &books{db: db, clock: clock.NewManual(day.Add(12 * time.Hour)), names: map[string]string{}}
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, b.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	limits, err := velocity.New(ctx, velocity.Config{DB: db, Keyring: ring, Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	sim := processor.Account{Kind: "simulator", Test: true, Processor: simulator.New(simulator.Config{Now: b.clock.Now})}
	// Every account decides as the simulator: the tests set a transaction's account after the fact
	// (took), and its follow-ups must still be carried out.
	b.ledger = payment.New(payment.Config{DB: db, Processors: processortest.OneAccount{Acct: sim}, Now: b.clock.Now, Velocity: limits})
	return b
}

// merchant creates a merchant.
func (b *books) merchant(t *testing.T) string {
	t.Helper()
	var id string
	err := b.db.Write(context.Background(), func(tx *store.Tx) error {
		m, err := merchant.Create(context.Background(), tx, merchant.New{Name: "Shop", Email: strings.ToLower(rand.Text()) + "@example.com"}, b.clock.Now())
		id = m.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// account creates a processor account of kind for the merchant.
func (b *books) account(t *testing.T, merchantID, kind string) string {
	t.Helper()
	id := "pa_" + rand.Text()
	_, err := b.db.Exec(context.Background(), `INSERT INTO processor_accounts (id, merchant_id, kind, config, settings, test, created_at)
		VALUES ($1, $2, $3, $4, '{}', $5, $6)`, id, merchantID, kind, []byte("sealed configuration"), false, b.clock.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// took records that account ("" for the simulator) took tx, under the test's name for it.
func (b *books) took(t *testing.T, name, account string, tx payment.Transaction, err error) payment.Transaction {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b.names[tx.TransactionID] = name
	if account != "" {
		if _, err := b.db.Exec(context.Background(), `UPDATE transactions SET processor_account = $1 WHERE id = $2`, account, tx.ID); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}

// charge takes a sale or an authorization of amount minor units of currency on card pan, at the clock's time.
func (b *books) charge(t *testing.T, name, merchantID, account, kind string, amount int64, currency, pan string) payment.Transaction {
	t.Helper()
	c, _ := money.Lookup(currency)
	n, err := card.ParseNumber(pan)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := card.ParseExpiry("12", "2099")
	tx, err := b.ledger.Charge(context.Background(), payment.Charge{Actor: payment.Actor{MerchantID: merchantID}, Kind: kind,
		Amount: amount, Currency: c, Card: n, Expiry: exp, CVV: "123", Source: payment.SourceEcommerce})
	return b.took(t, name, account, tx, err)
}

// followUp is a capture, refund or void of parent, taken by the account that took the parent.
func (b *books) followUp(t *testing.T, name, account string, op func(context.Context, payment.FollowUp) (payment.Transaction, error),
	parent payment.Transaction, amount int64) payment.Transaction {
	t.Helper()
	tx, err := op(context.Background(), payment.FollowUp{Actor: payment.Actor{MerchantID: parent.MerchantID}, ParentID: parent.ID, Amount: amount})
	return b.took(t, name, account, tx, err)
}

// row is the settlement report's row of tx, as a host writes it.
func (b *books) row(tx payment.Transaction, mti, code string, amount int64, currency string, reversed bool) reconcile.Row {
	return b.rowOf(tx.TransactionID, mti, code, amount, currency, reversed)
}

// rowOf is the report's row of the reference ref.
func (b *books) rowOf(ref string, mti, code string, amount int64, currency string, reversed bool) reconcile.Row {
	b.stan++
	return reconcile.Row{Date: day.Format(time.DateOnly), MTI: mti, ProcessingCode: code, STAN: fmt.Sprintf("%06d", b.stan),
		RRN: fmt.Sprintf("%012d", b.stan), Reference: ref, Amount: amount, Currency: currency, AuthCode: fmt.Sprintf("A%05d", b.stan),
		Reversed: reversed}
}

// The ledger holds every case reconciliation must tell apart, the report of the day is written for
// them, and reconciliation sorts each into its list, on both backends.
func TestReconcile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := newBooks(t, db)
		m, other := b.merchant(t), b.merchant(t)
		iso, stripe, otherISO := b.account(t, m, "iso8583"), b.account(t, m, "stripe"), b.account(t, other, "iso8583")
		const sale, auth = payment.KindSale, payment.KindAuthorization
		var rows []reconcile.Row
		add := func(r reconcile.Row) { rows = append(rows, r) }

		// The day before and the first instant of the next day: never the day's.
		b.clock.Advance(-24 * time.Hour)
		yesterday := b.charge(t, "yesterday", m, iso, sale, 900, "CAD", cardtest.Visa)
		b.charge(t, "yesterday without a row", m, iso, sale, 400, "CAD", cardtest.Visa)
		b.clock.Advance(36 * time.Hour)
		b.charge(t, "tomorrow", m, iso, sale, 350, "CAD", cardtest.Visa)
		b.clock.Advance(-time.Millisecond)
		lastInstant := b.charge(t, "the day's last instant", m, iso, sale, 300, "CAD", cardtest.Visa)
		b.clock.Advance(-12*time.Hour + time.Millisecond)

		// Matched.
		s := b.charge(t, "sale", m, iso, sale, 1999, "CAD", cardtest.Visa)
		add(b.row(s, "0200", "000000", 1999, "CAD", false))
		a := b.charge(t, "authorization", m, iso, auth, 5000, "CAD", cardtest.Mastercard)
		add(b.row(a, "0100", "000000", 5000, "CAD", false)) // captured: stays false, the capture is its own row
		c := b.followUp(t, "capture", iso, b.ledger.Capture, a, 3000)
		add(b.row(c, "0220", "000000", 3000, "CAD", false))
		s2 := b.charge(t, "refunded sale", m, iso, sale, 10000, "CAD", cardtest.Visa2)
		add(b.row(s2, "0200", "000000", 10000, "CAD", false))
		r := b.followUp(t, "refund", iso, b.ledger.Refund, s2, 2500)
		add(b.row(r, "0200", "200000", 2500, "CAD", false))
		v := b.charge(t, "card verification", m, iso, auth, 0, "CAD", cardtest.Visa)
		add(b.row(v, "0100", "000000", 0, "CAD", false))
		voided := b.charge(t, "voided authorization", m, iso, auth, 4000, "CAD", cardtest.Visa)
		b.followUp(t, "void", iso, b.ledger.Void, voided, 0)
		add(b.row(voided, "0100", "000000", 4000, "CAD", true))
		// Declined processing_error as when the timeout reversal was acknowledged.
		timedOut := b.charge(t, "reversed after a timeout", m, iso, sale, 1500, "CAD", cardtest.ProcessingError)
		add(b.row(timedOut, "0200", "000000", 1500, "CAD", true))
		// Still pending in Kassa (its outcome never recorded), reversed at the acquirer: the day's
		// pending attempts are read too, though the index of the day's transactions holds settled ones
		// only on PostgreSQL.
		pending := b.charge(t, "still pending", m, iso, sale, 1100, "CAD", cardtest.Visa)
		if _, err := db.Exec(ctx, `UPDATE transactions SET status = 'PENDING', lease_until = $2, event_seq = NULL, finished_at = NULL
			WHERE id = $1`, pending.ID, b.clock.Now().Add(time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		add(b.row(pending, "0200", "000000", 1100, "CAD", true))
		add(b.row(lastInstant, "0200", "000000", 300, "CAD", false))

		// Differences.
		ra := b.charge(t, "reversed but approved", m, iso, sale, 1200, "CAD", cardtest.Visa)
		add(b.row(ra, "0200", "000000", 1200, "CAD", true))
		b.charge(t, "approved without a row", m, iso, sale, 1500, "CAD", cardtest.Visa)
		vn := b.charge(t, "voided without a row", m, iso, auth, 700, "CAD", cardtest.Visa)
		b.followUp(t, "void without a row", iso, b.ledger.Void, vn, 0)
		unknown := strings.ToUpper(rand.Text()[:20])
		b.names[unknown] = "unknown to Kassa"
		add(b.rowOf(unknown, "0200", "000000", 700, "CAD", false))
		// Reversed and unknown: in effect nowhere, no difference.
		add(b.rowOf(strings.ToUpper(rand.Text()[:20]), "0200", "000000", 800, "CAD", true))
		d := b.charge(t, "declined", m, iso, sale, 1000, "CAD", cardtest.Declined)
		add(b.row(d, "0200", "000000", 1000, "CAD", false))
		add(b.row(b.charge(t, "amount", m, iso, sale, 2000, "CAD", cardtest.Visa), "0200", "000000", 2100, "CAD", false))
		add(b.row(b.charge(t, "currency", m, iso, sale, 500, "USD", cardtest.Visa), "0200", "000000", 500, "CAD", false))
		add(b.row(b.charge(t, "kind", m, iso, sale, 800, "CAD", cardtest.Visa), "0100", "000000", 800, "CAD", false))
		add(b.row(yesterday, "0200", "000000", 900, "CAD", false))
		add(b.row(b.charge(t, "simulator's", m, "", sale, 600, "CAD", cardtest.Visa), "0200", "000000", 600, "CAD", false))

		// Never counted.
		add(b.row(b.charge(t, "another merchant's", other, otherISO, sale, 600, "CAD", cardtest.Visa), "0200", "000000", 600, "CAD", false))
		b.charge(t, "another merchant's without a row", other, otherISO, sale, 650, "CAD", cardtest.Visa)
		b.charge(t, "simulator's without a row", m, "", sale, 610, "CAD", cardtest.Visa)
		b.charge(t, "Stripe's without a row", m, stripe, sale, 620, "CAD", cardtest.Visa)

		report, err := reconcile.Parse(strings.NewReader(writeReport(t, rows)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: m, Day: day.Add(5 * time.Hour), Report: report})
		if err != nil {
			t.Fatal(err)
		}
		names := func(entries []reconcile.Entry) []string {
			out := []string{}
			for _, e := range entries {
				name := b.names[e.Reference]
				if e.Differs != nil {
					name += " " + strings.Join(e.Differs, "+")
				}
				out = append(out, name)
			}
			return out
		}
		for _, l := range []struct {
			name string
			got  []reconcile.Entry
			want []string
		}{
			{"missing_in_kassa", res.MissingInKassa, []string{"unknown to Kassa", "declined", "yesterday", "simulator's"}},
			{"missing_at_acquirer", res.MissingAtAcquirer, []string{"approved without a row", "voided without a row"}},
			{"amount_mismatch", res.AmountMismatch, []string{"amount amount", "currency currency", "kind kind"}},
			{"reversed_at_acquirer", res.ReversedAtAcquirer, []string{"reversed but approved"}},
		} {
			if got := names(l.got); !reflect.DeepEqual(got, l.want) {
				t.Errorf("%s: %q, want %q", l.name, got, l.want)
			}
		}
		if res.Matched != 10 || res.OtherMerchants != 1 {
			t.Errorf("matched %d, other merchants %d; want 10 and 1", res.Matched, res.OtherMerchants)
		}
		// Sales and captures in, refunds out; authorizations, reversed rows, declines and voids count nothing.
		if want := map[string]int64{"CAD": 1999 + 3000 + 10000 - 2500 + 300 + 1200 + 1500 + 2000 + 800, "USD": 500}; !reflect.DeepEqual(res.KassaTotal, want) {
			t.Errorf("kassa_total %v, want %v", res.KassaTotal, want)
		}
		if want := map[string]int64{"CAD": 1999 + 3000 + 10000 - 2500 + 300 + 700 + 1000 + 2100 + 500 + 900 + 600, "USD": 0}; !reflect.DeepEqual(res.AcquirerTotal, want) {
			t.Errorf("acquirer_total %v, want %v", res.AcquirerTotal, want)
		}
		if !res.Differs() {
			t.Error("Differs() = false")
		}

		// Each entry says enough to act on: the row with its STAN and RRN, Kassa's transaction and status.
		byName := map[string]reconcile.Entry{}
		for _, l := range [][]reconcile.Entry{res.MissingInKassa, res.MissingAtAcquirer, res.AmountMismatch, res.ReversedAtAcquirer} {
			for _, e := range l {
				byName[b.names[e.Reference]] = e
			}
		}
		for name, check := range map[string]func(e reconcile.Entry) bool{
			"unknown to Kassa": func(e reconcile.Entry) bool {
				return e.Kassa == nil && e.Acquirer.STAN != "" && e.Acquirer.RRN != "" && e.Acquirer.Kind == "SALE" && e.Acquirer.Amount == 700
			},
			"declined": func(e reconcile.Entry) bool {
				return e.Kassa.Status == "DECLINED" && e.Kassa.DeclineCode == "card_declined" && e.Kassa.ID == d.ID && e.Acquirer.MTI == "0200"
			},
			"yesterday": func(e reconcile.Entry) bool {
				return e.Kassa.Status == "APPROVED" && e.Kassa.CreatedAt == day.Add(-12*time.Hour).UnixMilli() && e.Kassa.Processor == "iso8583"
			},
			"simulator's": func(e reconcile.Entry) bool {
				return e.Kassa.Status == "APPROVED" && e.Kassa.Processor == "simulator" && e.Kassa.ProcessorAccount == ""
			},
			"voided without a row": func(e reconcile.Entry) bool {
				return e.Acquirer == nil && e.Kassa.Kind == "AUTHORIZATION" && e.Kassa.ClosedBy == "VOID" && e.Kassa.Amount == 700 &&
					e.Kassa.Currency == "CAD" && e.Kassa.ProcessorAccount == iso
			},
			"currency": func(e reconcile.Entry) bool {
				return e.Kassa.Currency == "USD" && e.Acquirer.Currency == "CAD" && e.Kassa.Amount == 500 && e.Acquirer.Amount == 500
			},
			"kind": func(e reconcile.Entry) bool { return e.Kassa.Kind == "SALE" && e.Acquirer.Kind == "AUTHORIZATION" },
			"reversed but approved": func(e reconcile.Entry) bool {
				return e.Kassa.Status == "APPROVED" && e.Acquirer.Reversed && e.Acquirer.AuthCode != ""
			},
		} {
			if e, ok := byName[name]; !ok || !check(e) {
				t.Errorf("%s: entry %+v (kassa %+v, acquirer %+v)", name, e, e.Kassa, e.Acquirer)
			}
		}

		// The other merchant's day, from the same report of the host both share: its row matches, the
		// first merchant's 17 rows are not its own, the row no merchant of Kassa knows is missing for it too.
		res, err = reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: other, Day: day, Report: report})
		if err != nil {
			t.Fatal(err)
		}
		if res.Matched != 1 || fmt.Sprint(names(res.MissingAtAcquirer)) != "[another merchant's without a row]" || res.OtherMerchants != 17 ||
			fmt.Sprint(names(res.MissingInKassa)) != "[unknown to Kassa]" {
			t.Errorf("the other merchant's reconciliation: matched %d, missing at the acquirer %q, missing in Kassa %q, other merchants %d",
				res.Matched, names(res.MissingAtAcquirer), names(res.MissingInKassa), res.OtherMerchants)
		}
	})
}

// A day on which the report and the ledger agree differs in nothing; a report of another day and an
// unknown merchant are errors.
func TestReconcileAgreesAndRefuses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		b := newBooks(t, db)
		m := b.merchant(t)
		iso := b.account(t, m, "iso8583")
		s := b.charge(t, "sale", m, iso, payment.KindSale, 1999, "EUR", cardtest.Visa)
		r := b.followUp(t, "refund", iso, b.ledger.Refund, s, 1999)
		report, err := reconcile.Parse(strings.NewReader(writeReport(t, []reconcile.Row{b.row(s, "0200", "000000", 1999, "EUR", false),
			b.row(r, "0200", "200000", 1999, "EUR", false)})))
		if err != nil {
			t.Fatal(err)
		}
		res, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: m, Day: day, Report: report})
		if err != nil || res.Differs() || res.Matched != 2 || fmt.Sprint(res.KassaTotal, res.AcquirerTotal) != "map[EUR:0] map[EUR:0]" {
			t.Fatalf("Reconcile = %+v, %v; want 2 matched, no difference", res, err)
		}
		report[1].Date = "2026-11-24"
		_, err = reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: m, Day: day, Report: report})
		var re *reconcile.ReportError
		if !errors.As(err, &re) || re.Line != 3 || re.Column != "date" {
			t.Fatalf("a row of another day: %v", err)
		}
		if _, err := reconcile.Reconcile(ctx, reconcile.Config{DB: db, MerchantID: "0000000000", Day: day}); !errors.Is(err, merchant.ErrNotFound) {
			t.Fatalf("an unknown merchant: %v", err)
		}
	})
}

package iso8583_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// conn is an account opened on a kind: the processor and what the tests call on it.
type conn interface {
	processor.Processor
	processor.Preparer
	processor.Reverser
}

// config is an account's configuration at addr.
func config(addr, terminal, timeout string) []byte {
	return fmt.Appendf(nil, `{"address":%q,"merchant_id":"KASSA0000000001","terminal_id":%q,"acquirer_id":"12345","timeout":%q,"test":true}`,
		addr, terminal, timeout)
}

// newKind returns a kind on db (a fresh SQLite database when nil) that logs to the returned buffer,
// closed when the test ends.
func newKind(t testing.TB, db *store.DB, cfg iso8583.KindConfig) (*iso8583.Kind, *cardtest.Buffer) {
	t.Helper()
	if db == nil {
		db = storetest.SQLite(t)
	}
	log, logs := cardtest.Logger(t)
	cfg.DB, cfg.Logger = db, log
	if cfg.ReconnectMin == 0 {
		cfg.ReconnectMin = 20 * time.Millisecond
	}
	k := iso8583.NewKind(cfg)
	t.Cleanup(func() { k.Close() })
	return k, logs
}

func open(t testing.TB, k *iso8583.Kind, config []byte) conn {
	t.Helper()
	p, err := k.Open(config)
	if err != nil {
		t.Fatal(err)
	}
	return p.(conn)
}

var cad, _ = money.Lookup("CAD")

func payment(t testing.TB, ref, pan string, amount int64, capture bool) processor.Payment {
	t.Helper()
	n, err := card.ParseNumber(pan)
	if err != nil {
		t.Fatal(err)
	}
	return processor.Payment{Reference: ref, Merchant: processor.Merchant{ID: "0000000001"}, Amount: amount, Currency: cad,
		Capture: capture, Card: n, Expiry: card.Expiry{Month: 12, Year: 2099}, CVV: "123"}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	processortest.Run(t, open(t, k, config(h.addr, "TERM0001", "5s")), processortest.Config{Approve: cardtest.Visa})
}

// bitmap is the hex bitmap of a message with fields ids: the primary, and the secondary when a field
// above 64 is present (its bit 1 set in the primary).
func bitmap(ids ...int) string {
	var bm [16]byte
	for _, id := range ids {
		if id > 64 {
			bm[0] |= 0x80
		}
		bm[(id-1)/8] |= 0x80 >> ((id - 1) % 8)
	}
	n := 8
	if bm[0]&0x80 != 0 {
		n = 16
	}
	return strings.ToUpper(hex.EncodeToString(bm[:n]))
}

// wireOf is the message mti with fields, each given as it goes on the wire (with its LL or LLL
// prefix), in field order after the bitmap.
func wireOf(mti string, fields map[int]string) string {
	var ids []int
	for id := range fields {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString(mti + bitmap(ids...))
	for _, id := range ids {
		b.WriteString(fields[id])
	}
	return b.String()
}

// TestMessagesOnTheWire checks every message type byte for byte against the profile: its fields, and
// each field's format.
func TestMessagesOnTheWire(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	now := clock.NewManual(time.Date(2026, 11, 23, 15, 4, 5, 0, time.UTC))
	k, _ := newKind(t, nil, iso8583.KindConfig{Now: now.Now, EchoInterval: time.Hour})
	p := open(t, k, config(h.addr, "TERM0001", "1s"))
	ctx := context.Background()
	toronto, err := time.LoadLocation("America/Toronto")
	if err != nil {
		t.Fatal(err)
	}
	ref := func(n int) string { return fmt.Sprintf("T%019d", n) } // 20 characters, like a transaction_id
	// Fields every financial message of the n-th trace carries. The fresh database numbers the
	// terminal's STANs and the acquirer's RRNs from 1; the clock stands still.
	common := func(n int, amount string) map[int]string {
		return map[int]string{4: amount, 7: "1123150405", 11: fmt.Sprintf("%06d", n), 37: fmt.Sprintf("%012d", n),
			41: "TERM0001", 42: "KASSA0000000001", 49: "124", 62: "020" + ref(n)}
	}
	with := func(m map[int]string, more map[int]string) map[int]string {
		for id, v := range more {
			m[id] = v
		}
		return m
	}

	// 0100: keyed, e-commerce, CVV2 and a successful 3-D Secure in field 48, the merchant's local time
	// (Toronto, UTC-5 in November) in 12 and 13.
	auth := payment(t, ref(1), cardtest.Visa, 1999, false)
	auth.Merchant.Location = toronto
	auth.Authentication = processor.AuthenticationSucceeded
	authRes, err := p.Authorize(ctx, auth)
	if err != nil || !authRes.Approved || authRes.Message != "Approved" {
		t.Fatalf("Authorize = %+v, %v", authRes, err)
	}
	// 0200: a subscription's charge of a stored card — card on file (22 = 100), recurring (25 = 02),
	// no CVV2 and no authentication, so no field 48.
	sale := payment(t, ref(2), cardtest.Mastercard, 2500, true)
	sale.CVV, sale.StoredCard, sale.Recurring = "", true, true
	saleRes, err := p.Authorize(ctx, sale)
	if err != nil || !saleRes.Approved {
		t.Fatalf("sale = %+v, %v", saleRes, err)
	}
	capRes, err := p.Capture(ctx, processor.FollowUp{Reference: ref(3), Original: authRes.Reference, Amount: 1500, Currency: cad})
	if err != nil || !capRes.Approved {
		t.Fatalf("Capture = %+v, %v", capRes, err)
	}
	refund, err := p.Refund(ctx, processor.FollowUp{Reference: ref(4), Original: saleRes.Reference, Amount: 700, Currency: cad})
	if err != nil || !refund.Approved {
		t.Fatalf("Refund = %+v, %v", refund, err)
	}
	// A failed 3-D Secure is sent as AU N, for the host to decide.
	auth2 := payment(t, ref(5), cardtest.Visa, 3000, false)
	auth2.Authentication = processor.AuthenticationFailed
	auth2Res, err := p.Authorize(ctx, auth2)
	if err != nil || !auth2Res.Approved {
		t.Fatalf("Authorize = %+v, %v", auth2Res, err)
	}
	void, err := p.Void(ctx, processor.FollowUp{Reference: ref(6), Original: auth2Res.Reference, Amount: 3000, Currency: cad})
	if err != nil || !void.Approved {
		t.Fatalf("Void = %+v, %v", void, err)
	}
	// A sale the host does not answer: its reversal is a 0400 of its own (STAN 8) naming it (STAN 7).
	h.setScript(func(w *wire) action { return action{silent: w.mti == "0200" && w.get(62) == ref(7)} })
	_, err = p.Authorize(ctx, payment(t, ref(7), cardtest.Visa, 4200, true))
	var un *processor.Unanswered
	if !errors.As(err, &un) {
		t.Fatalf("unanswered sale: %v, want *processor.Unanswered", err)
	}
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err != nil {
		t.Fatalf("Reverse: %v", err)
	}

	pan := func(s string) string { return fmt.Sprintf("%02d%s", len(s), s) }
	want := []string{
		wireOf("0100", with(common(1, "000000001999"), map[int]string{2: pan(cardtest.Visa), 3: "000000", 12: "100405", 13: "1123",
			14: "9912", 22: "010", 25: "59", 48: "012CV03123AU01Y"})),
		wireOf("0200", with(common(2, "000000002500"), map[int]string{2: pan(cardtest.Mastercard), 3: "000000", 12: "150405", 13: "1123",
			14: "9912", 22: "100", 25: "02"})),
		wireOf("0220", with(common(3, "000000001500"), map[int]string{3: "000000",
			90: "0100" + "000001" + "1123150405" + "00000012345" + "00000000000"})),
		wireOf("0200", with(common(4, "000000000700"), map[int]string{3: "200000",
			90: "0200" + "000002" + "1123150405" + "00000012345" + "00000000000"})),
		wireOf("0100", with(common(5, "000000003000"), map[int]string{2: pan(cardtest.Visa), 3: "000000", 12: "150405", 13: "1123",
			14: "9912", 22: "010", 25: "59", 48: "012CV03123AU01N"})),
		wireOf("0400", with(common(6, "000000003000"), map[int]string{
			90: "0100" + "000005" + "1123150405" + "00000012345" + "00000000000"})),
		wireOf("0200", with(common(7, "000000004200"), map[int]string{2: pan(cardtest.Visa), 3: "000000", 12: "150405", 13: "1123",
			14: "9912", 22: "010", 25: "59", 48: "007CV03123"})),
		wireOf("0400", with(common(8, "000000004200"), map[int]string{62: "020" + ref(7),
			90: "0200" + "000007" + "1123150405" + "00000012345" + "00000000000"})),
	}
	got := h.await(len(want), financial)
	for i := range want {
		if string(got[i].raw) != want[i] {
			t.Errorf("message %d:\n got %s\nwant %s", i+1, got[i].raw, want[i])
		}
	}

	// Network management: 0800 with 7, 11 and 24 — sign-on (001) first, then echo (301) and sign-off
	// (002). Their STANs are the connection's own.
	k2, _ := newKind(t, nil, iso8583.KindConfig{Now: now.Now, EchoInterval: 50 * time.Millisecond})
	h2 := newScripted(t)
	open(t, k2, config(h2.addr, "TERM0001", "1s"))
	h2.await(1, func(w *wire) bool { return w.network("301") })
	k2.Close()
	for _, w := range h2.await(3, nil) {
		if w.mti != "0800" || w.get(24) == "" {
			t.Fatalf("message %s, want only network management on an idle connection", w.raw)
		}
		if want := wireOf("0800", map[int]string{7: "1123150405", 11: w.get(11), 24: w.get(24)}); string(w.raw) != want || len(w.get(11)) != 6 {
			t.Errorf("network management message:\n got %s\nwant %s", w.raw, want)
		}
	}
	all := h2.messages(nil)
	if !all[0].network("001") || !all[len(all)-1].network("002") {
		t.Errorf("network management: %s; want sign-on first and sign-off last", describe(all))
	}
}

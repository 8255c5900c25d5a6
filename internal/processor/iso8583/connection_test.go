package iso8583_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/iso8583"
)

// signedOnFirst fails t unless every connection's first message is a sign-on that the host accepted
// before any financial message came on that connection.
func signedOnFirst(t *testing.T, ws []*wire, accepted func(w *wire) bool) {
	t.Helper()
	on := map[int]bool{}
	for _, w := range ws {
		switch {
		case w.network("001"):
			on[w.conn] = on[w.conn] || accepted(w)
		case !on[w.conn] && !w.network("002"):
			t.Errorf("connection %d: %s before an accepted sign-on:%s", w.conn, w.raw, describe(ws))
		}
	}
}

func TestSignOnBeforeFinancialMessages(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	// The host refuses the first two sign-ons: the connector reconnects until one is accepted, and
	// sends nothing else until then.
	var signOns atomic.Int32
	refused := map[*wire]bool{}
	var mu sync.Mutex
	h.setScript(func(w *wire) action {
		if w.network("001") && signOns.Add(1) <= 2 {
			mu.Lock()
			refused[w] = true
			mu.Unlock()
			return action{code: "91"}
		}
		return action{}
	})
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "10s"))
	if r, err := p.Authorize(context.Background(), payment(t, "sign-on", cardtest.Visa, 1000, true)); err != nil || !r.Approved {
		t.Fatalf("Authorize = %+v, %v", r, err)
	}
	mu.Lock()
	defer mu.Unlock()
	ws := h.messages(nil)
	signedOnFirst(t, ws, func(w *wire) bool { return !refused[w] })
	if n := signOns.Load(); n != 3 || h.connections() != 3 {
		t.Errorf("%d sign-ons on %d connections, want 3 on 3 (two refused)", n, h.connections())
	}
}

func TestNeverSignedOnIsNotSent(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	h.setScript(func(w *wire) action { return action{code: "96", silent: !w.network("001")} })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "300ms"))
	_, err := p.Authorize(context.Background(), payment(t, "refused", cardtest.Visa, 1000, true))
	var un *processor.Unanswered
	if err == nil || errors.As(err, &un) {
		t.Fatalf("Authorize without a signed-on connection = %v, want an error that is not Unanswered (nothing was sent)", err)
	}
	if fin := h.messages(financial); len(fin) != 0 {
		t.Errorf("the host received financial messages without an accepted sign-on:%s", describe(fin))
	}
}

func TestNotConnectedIsNotSent(t *testing.T) {
	t.Parallel()
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(closedAddress(t), "TERM0001", "200ms"))
	start := time.Now()
	_, err := p.Authorize(context.Background(), payment(t, "nobody", cardtest.Visa, 1000, true))
	var un *processor.Unanswered
	if err == nil || errors.As(err, &un) || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("Authorize with no host = %v, want a plain error (nothing was sent)", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Authorize took %s, want about the account's timeout (200ms)", d)
	}
	if err := p.Reverse(context.Background(), processor.Merchant{}, `{"stan":"000002","f7":"1123150405","rrn":"000000000002",`+
		`"amount":1000,"currency":"124","reference":"nobody","original":"02000000011123150405"}`); err == nil {
		t.Error("Reverse with no host = nil, want an error (not acknowledged)")
	}
}

func TestEchoWhenIdle(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	k, _ := newKind(t, nil, iso8583.KindConfig{EchoInterval: 50 * time.Millisecond})
	p := open(t, k, config(h.addr, "TERM0001", "5s"))
	if _, err := p.Authorize(context.Background(), payment(t, "echo", cardtest.Visa, 1000, true)); err != nil {
		t.Fatal(err)
	}
	h.await(2, func(w *wire) bool { return w.network("301") })
	if h.connections() != 1 {
		t.Errorf("%d connections, want one kept alive by echo tests", h.connections())
	}

	// A host that refuses an echo test is taken for gone: the connector connects and signs on again.
	h.setScript(func(w *wire) action {
		if w.network("301") {
			return action{code: "96"}
		}
		return action{}
	})
	h.await(1, func(w *wire) bool { return w.conn == 1 && w.network("001") })
}

func TestReconnectAfterTheHostDrops(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	// The host closes the connection when it receives the first sale, without answering.
	var dropped atomic.Bool
	h.setScript(func(w *wire) action { return action{drop: financial(w) && dropped.CompareAndSwap(false, true)} })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "10s"))
	ctx := context.Background()
	start := time.Now()
	_, err := p.Authorize(ctx, payment(t, "in-flight", cardtest.Visa, 1000, true))
	var un *processor.Unanswered
	if !errors.As(err, &un) {
		t.Fatalf("Authorize in flight when the host dropped = %v, want *processor.Unanswered", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the in-flight request took %s: it should fail with the connection, not at its timeout", d)
	}
	// The connector reconnects, signs on again, and the reversal and the next sale go through.
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err != nil {
		t.Fatalf("Reverse after reconnecting: %v", err)
	}
	if r, err := p.Authorize(ctx, payment(t, "after", cardtest.Visa, 1000, true)); err != nil || !r.Approved {
		t.Fatalf("Authorize after reconnecting = %+v, %v", r, err)
	}
	ws := h.messages(nil)
	signedOnFirst(t, ws, func(*wire) bool { return true })
	if h.connections() != 2 {
		t.Errorf("%d connections, want 2:%s", h.connections(), describe(ws))
	}
}

// TestReconnectBacksOff: a host that accepts connections and closes them at once is not hammered:
// the waits double from ReconnectMin up to ReconnectMax.
func TestReconnectBacksOff(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var attempts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			c.Close()
		}
	}()
	k, _ := newKind(t, nil, iso8583.KindConfig{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 80 * time.Millisecond})
	open(t, k, config(ln.Addr().String(), "TERM0001", "1s"))
	time.Sleep(time.Second)
	// Waits of at least 5, 10, 20, 40 and then 40 ms (the lower half of 80) allow at most 1 + 4 + 24
	// attempts in a second; without backoff, 10 ms apart, it would be about 100.
	if n := attempts.Load(); n < 3 || n > 29 {
		t.Errorf("%d connection attempts in a second, want between 3 and 29", n)
	}
}

func TestAccountsOnOneHostShareOneConnection(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	// Both terminals' first STAN is 000001. The host waits for both sales, answers terminal 2's first
	// and declines it, then approves terminal 1's: answers are matched by terminal and STAN.
	arrived := make(chan struct{}, 2)
	both := make(chan struct{})
	go func() { <-arrived; <-arrived; close(both) }()
	h.setScript(func(w *wire) action {
		if !financial(w) {
			return action{}
		}
		arrived <- struct{}{}
		<-both
		if w.get(41) == "TERM0002" {
			return action{code: "51"}
		}
		return action{after: 50 * time.Millisecond}
	})
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p1 := open(t, k, config(h.addr, "TERM0001", "10s"))
	p2 := open(t, k, config(h.addr, "TERM0002", "10s"))
	var wg sync.WaitGroup
	results := make([]processor.Result, 2)
	errs := make([]error, 2)
	for i, p := range []conn{p1, p2} {
		wg.Go(func() {
			results[i], errs[i] = p.Authorize(context.Background(), payment(t, fmt.Sprint("terminal", i+1), cardtest.Visa, 1000, true))
		})
	}
	wg.Wait()
	if errs[0] != nil || !results[0].Approved || errs[1] != nil || results[1].Code != processor.CodeInsufficientFunds {
		t.Errorf("terminal 1: %+v, %v (want approved); terminal 2: %+v, %v (want insufficient_funds)", results[0], errs[0], results[1], errs[1])
	}
	fin := h.messages(financial)
	if len(fin) != 2 || fin[0].get(11) != "000001" || fin[1].get(11) != "000001" {
		t.Errorf("want both terminals' first STAN 000001:%s", describe(fin))
	}
	if h.connections() != 1 {
		t.Errorf("%d connections for two accounts on one host, want 1", h.connections())
	}
}

func TestManyInFlight(t *testing.T) {
	t.Parallel()
	const n = 50
	h := newScripted(t)
	// The host holds every sale until all n have arrived, then answers them in the reverse order:
	// those of an even amount approved, odd ones declined.
	var mu sync.Mutex
	var held []chan struct{}
	h.setScript(func(w *wire) action {
		if !financial(w) {
			return action{}
		}
		turn := make(chan struct{})
		mu.Lock()
		held = append(held, turn)
		if len(held) == n {
			go func() {
				for i := n - 1; i >= 0; i-- {
					close(held[i])
					time.Sleep(time.Millisecond)
				}
			}()
		}
		mu.Unlock()
		<-turn
		if amount := w.get(4); (amount[len(amount)-1]-'0')%2 == 1 {
			return action{code: "05"}
		}
		return action{}
	})
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "20s"))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			amount := int64(1000 + i)
			r, err := p.Authorize(context.Background(), payment(t, fmt.Sprint("many", i), cardtest.Visa, amount, true))
			if err != nil || r.Approved != (amount%2 == 0) || !strings.Contains(r.Reference, fmt.Sprintf(":%d:", amount)) {
				t.Errorf("sale of %d = %+v, %v", amount, r, err)
			}
		})
	}
	wg.Wait()
}

func TestUnansweredIsReversed(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	// The host answers the sale 300 ms after the connector's timeout, then takes two sendings of the
	// reversal to answer it.
	var reversals atomic.Int32
	h.setScript(func(w *wire) action {
		switch w.mti {
		case "0200":
			return action{after: 500 * time.Millisecond}
		case "0400":
			return action{silent: reversals.Add(1) == 1}
		}
		return action{}
	})
	k, logs := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "200ms"))
	ctx := context.Background()
	_, err := p.Authorize(ctx, payment(t, "late", cardtest.Visa, 1999, true))
	var un *processor.Unanswered
	if !errors.As(err, &un) || un.Reversal == "" {
		t.Fatalf("Authorize without an answer in time = %v, want *processor.Unanswered with a reversal", err)
	}
	sale := h.messages(financial)[0]

	// The late answer is logged and ignored.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "no longer awaited") {
		if time.Now().After(deadline) {
			t.Fatalf("the late answer was not logged: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"stan":"`+sale.get(11)+`"`) {
		t.Errorf("the log does not name the late answer's STAN %s: %s", sale.get(11), logs.String())
	}

	// The first sending of the reversal gets no answer: an error, to be sent again. The second is a
	// retransmission (the same bytes, so the same fields 7 and 11), and is acknowledged.
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err == nil {
		t.Fatal("Reverse without an answer = nil, want an error")
	}
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err != nil {
		t.Fatalf("Reverse = %v", err)
	}
	rev := h.messages(func(w *wire) bool { return w.mti == "0400" })
	if len(rev) != 2 || string(rev[0].raw) != string(rev[1].raw) {
		t.Fatalf("the reversal's sendings differ:%s", describe(rev))
	}
	if rev[0].get(11) == sale.get(11) || rev[0].get(90)[:20] != "0200"+sale.get(11)+sale.get(7) {
		t.Errorf("reversal %s: want its own STAN and field 90 naming the sale %s", rev[0].raw, sale.raw)
	}

	// 25 (the host never received the original) acknowledges the reversal too; another code does not,
	// nor does an answer of the wrong type.
	for code, ok := range map[string]bool{"25": true, "00": true, "05": false, "96": false} {
		h.setScript(func(*wire) action { return action{code: code} })
		if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); (err == nil) != ok {
			t.Errorf("Reverse answered %s = %v", code, err)
		}
	}
	h.setScript(func(w *wire) action { return action{mti: "0210"} })
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err == nil {
		t.Error("Reverse answered with a 0210 = nil, want an error")
	}
	h.setScript(nil)
	if err := p.Reverse(ctx, processor.Merchant{}, "not a reversal"); err == nil {
		t.Error("Reverse of garbage = nil")
	}
}

// TestUnusableAnswerIsUnanswered: an answer the connector cannot take for a decision (the wrong MTI)
// leaves the outcome unknown.
func TestUnusableAnswerIsUnanswered(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	h.setScript(func(w *wire) action {
		if financial(w) {
			return action{mti: "0110"}
		}
		return action{}
	})
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "300ms"))
	_, err := p.Authorize(context.Background(), payment(t, "wrong-mti", cardtest.Visa, 1000, true))
	var un *processor.Unanswered
	if !errors.As(err, &un) {
		t.Fatalf("Authorize answered with the wrong MTI = %v, want *processor.Unanswered", err)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	h.setScript(func(w *wire) action { return action{silent: financial(w)} })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "2s"))
	var un *processor.Unanswered

	// Canceled before the call: nothing is sent, and the error is not Unanswered.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Authorize(ctx, payment(t, "before", cardtest.Visa, 1000, true)); err == nil || errors.As(err, &un) {
		t.Errorf("Authorize with a canceled context = %v, want a plain error", err)
	}

	// Canceled once the request is on the wire: the host may have it, so it is Unanswered.
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		h.await(1, financial)
		cancel()
	}()
	_, err := p.Authorize(ctx, payment(t, "on the wire", cardtest.Visa, 1000, true))
	if !errors.As(err, &un) || !errors.Is(err, context.Canceled) {
		t.Errorf("Authorize canceled after sending = %v, want *processor.Unanswered", err)
	}
	if fin := h.messages(financial); len(fin) != 1 || fin[0].get(62) != "on the wire" {
		t.Errorf("want only the second request at the host:%s", describe(fin))
	}

	// Canceled while waiting for a connection: nothing was sent.
	k2, _ := newKind(t, nil, iso8583.KindConfig{})
	p2 := open(t, k2, config(closedAddress(t), "TERM0001", "10s"))
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p2.Authorize(ctx, payment(t, "offline", cardtest.Visa, 1000, true)); err == nil || errors.As(err, &un) {
		t.Errorf("Authorize canceled while not connected = %v, want a plain error", err)
	}
}

func TestResponseCodes(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	var code atomic.Value
	h.setScript(func(w *wire) action {
		if financial(w) {
			return action{code: code.Load().(string)}
		}
		return action{}
	})
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "5s"))
	ctx := context.Background()
	code.Store("00")
	auth, err := p.Authorize(ctx, payment(t, "auth", cardtest.Visa, 1000, false))
	if err != nil || !auth.Approved {
		t.Fatal(auth, err)
	}
	sale, err := p.Authorize(ctx, payment(t, "sale", cardtest.Visa, 1000, true))
	if err != nil || !sale.Approved {
		t.Fatal(sale, err)
	}
	follow := func(original string) processor.FollowUp {
		return processor.FollowUp{Reference: "follow", Original: original, Amount: 500, Currency: cad}
	}
	ops := map[string]func() (processor.Result, error){
		"sale":    func() (processor.Result, error) { return p.Authorize(ctx, payment(t, "s", cardtest.Visa, 1000, true)) },
		"capture": func() (processor.Result, error) { return p.Capture(ctx, follow(auth.Reference)) },
		"refund":  func() (processor.Result, error) { return p.Refund(ctx, follow(sale.Reference)) },
		"void":    func() (processor.Result, error) { return p.Void(ctx, follow(auth.Reference)) },
	}
	for _, tc := range []struct {
		op, code, want string // want "" for approved
	}{
		{"sale", "00", ""},
		{"sale", "05", processor.CodeDeclined},
		{"sale", "14", processor.CodeDeclined},
		{"sale", "12", processor.CodeDeclined},
		{"sale", "13", processor.CodeDeclined},
		{"sale", "41", processor.CodeLostCard},
		{"sale", "43", processor.CodeStolenCard},
		{"sale", "51", processor.CodeInsufficientFunds},
		{"sale", "54", processor.CodeExpiredCard},
		{"sale", "N7", processor.CodeIncorrectCVC},
		{"sale", "91", processor.CodeProcessingError},
		{"sale", "96", processor.CodeProcessingError},
		{"sale", "Q9", processor.CodeDeclined}, // not in the profile: a refusal
		{"sale", "25", processor.CodeDeclined},
		{"capture", "00", ""},
		{"capture", "25", processor.CodeProcessingError},
		{"capture", "13", processor.CodeDeclined},
		{"refund", "00", ""},
		{"refund", "25", processor.CodeProcessingError},
		{"refund", "13", processor.CodeDeclined},
		{"void", "00", ""},
		{"void", "25", ""}, // no authorization held: what the void asks for
		{"void", "12", processor.CodeDeclined},
	} {
		code.Store(tc.code)
		r, err := ops[tc.op]()
		if err != nil || r.Approved != (tc.want == "") || r.Code != tc.want || r.Message == "" || r.Reference == "" {
			t.Errorf("%s answered %s = %+v, %v; want code %q", tc.op, tc.code, r, err, tc.want)
		}
		if tc.want == "" && r.Message != "Approved" {
			t.Errorf("%s answered %s: message %q, want Approved", tc.op, tc.code, r.Message)
		}
	}

	// Follow-ups name what they act on: a capture of a sale, or a refund of an authorization, is a
	// mistake of the caller's, and no reference of this connector is one either.
	code.Store("00")
	for name, call := range map[string]func() (processor.Result, error){
		"capture of a sale":          func() (processor.Result, error) { return p.Capture(ctx, follow(sale.Reference)) },
		"refund of an authorization": func() (processor.Result, error) { return p.Refund(ctx, follow(auth.Reference)) },
		"void of a sale":             func() (processor.Result, error) { return p.Void(ctx, follow(sale.Reference)) },
		"capture of garbage":         func() (processor.Result, error) { return p.Capture(ctx, follow("sim_123")) },
	} {
		if r, err := call(); err == nil {
			t.Errorf("%s = %+v, want an error", name, r)
		}
	}
}

func TestLookupReverses(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "5s"))
	ctx := context.Background()
	for _, op := range []processor.Operation{
		{Reference: "never-prepared", Kind: processor.OperationSale, Amount: 1000, Currency: cad},
		{Reference: "void", Kind: processor.OperationVoid, Amount: 1000, Currency: cad, Trace: "000009:20261123150405:000000000009"},
	} {
		if _, err := p.Lookup(ctx, op); !errors.Is(err, processor.ErrNotFound) {
			t.Errorf("Lookup(%s) = %v, want ErrNotFound", op.Reference, err)
		}
	}

	// An operation prepared (and maybe sent) is reversed: Lookup describes the 0400, naming it by the
	// STAN and field 7 of its trace; the host that never received it answers 25.
	tr, err := p.Prepare(ctx, processor.Merchant{})
	if err != nil {
		t.Fatal(err)
	}
	h.setScript(func(w *wire) action {
		if w.mti == "0400" {
			return action{code: "25"}
		}
		return action{}
	})
	for kind, mti := range map[string]string{processor.OperationSale: "0200", processor.OperationAuthorization: "0100",
		processor.OperationCapture: "0220", processor.OperationRefund: "0200"} {
		_, err = p.Lookup(ctx, processor.Operation{Reference: "crashed-" + kind, Kind: kind, Amount: 1234, Currency: cad, Trace: tr})
		var un *processor.Unanswered
		if !errors.As(err, &un) {
			t.Fatalf("Lookup(%s) = %v, want *processor.Unanswered", kind, err)
		}
		if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err != nil {
			t.Fatalf("Reverse: %v", err)
		}
		rev := h.messages(func(w *wire) bool { return w.mti == "0400" && w.get(62) == "crashed-"+kind })
		stan, at := tr[:6], tr[11:21]
		if len(rev) != 1 || rev[0].get(90)[:20] != mti+stan+at || rev[0].get(4) != "1234" || rev[0].get(11) == stan {
			t.Errorf("the reversal of a %s with trace %s:%s", kind, tr, describe(rev))
		}
	}
	if _, err := p.Lookup(ctx, processor.Operation{Reference: "x", Kind: "payout", Trace: tr}); err == nil || errors.Is(err, processor.ErrNotFound) {
		t.Errorf("Lookup of an unknown kind = %v", err)
	}
}

// TestUnansweredVoidIsRepeated: a 0400 is not undone by another; a void without an answer is sent
// again, byte for byte, until the host answers.
func TestUnansweredVoidIsRepeated(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	var voids atomic.Int32
	h.setScript(func(w *wire) action { return action{silent: w.mti == "0400" && voids.Add(1) == 1} })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "300ms"))
	ctx := context.Background()
	auth, err := p.Authorize(ctx, payment(t, "auth", cardtest.Visa, 1000, false))
	if err != nil || !auth.Approved {
		t.Fatal(auth, err)
	}
	_, err = p.Void(ctx, processor.FollowUp{Reference: "void", Original: auth.Reference, Amount: 1000, Currency: cad})
	var un *processor.Unanswered
	if !errors.As(err, &un) || !un.Completes {
		t.Fatalf("Void without an answer = %v, want *processor.Unanswered that completes it", err)
	}
	if err := p.Reverse(ctx, processor.Merchant{}, un.Reversal); err != nil {
		t.Fatalf("Reverse = %v", err)
	}
	sent := h.messages(func(w *wire) bool { return w.mti == "0400" })
	if len(sent) != 2 || string(sent[0].raw) != string(sent[1].raw) || sent[0].get(62) != "void" {
		t.Errorf("want the void sent twice, identical:%s", describe(sent))
	}
}

// TestUnpackableIsNotSent: a request that cannot be encoded (an amount beyond field 4's 12 digits) is
// never written, so it fails with a plain error.
func TestUnpackableIsNotSent(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.addr, "TERM0001", "5s"))
	_, err := p.Authorize(context.Background(), payment(t, "too-much", cardtest.Visa, 1_000_000_000_000, true))
	var un *processor.Unanswered
	if err == nil || errors.As(err, &un) {
		t.Fatalf("Authorize of 10^12 = %v, want a plain error", err)
	}
	if r, err := p.Authorize(context.Background(), payment(t, "fine", cardtest.Visa, 999_999_999_999, true)); err != nil || !r.Approved {
		t.Fatalf("Authorize of 10^12 - 1 = %+v, %v", r, err)
	}
	if fin := h.messages(financial); len(fin) != 1 {
		t.Errorf("want only the second sale at the host:%s", describe(fin))
	}
}

// TestTLS: an account with TLS settings verifies the host against its CA file and presents its client
// certificate; it gets its own connection, apart from a plain one to the same address.
func TestTLS(t *testing.T) {
	t.Parallel()
	h := newScripted(t)
	certFile, keyFile, _ := tlsFiles(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	// A TLS front for the scripted host that requires the client certificate.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var handshakes atomic.Int32
	go func() {
		for {
			front, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer front.Close()
				if err := front.(*tls.Conn).Handshake(); err != nil {
					return
				}
				handshakes.Add(1)
				back, err := net.Dial("tcp", h.addr)
				if err != nil {
					return
				}
				defer back.Close()
				go io.Copy(back, front)
				io.Copy(front, back)
			}()
		}
	}()
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	withTLS := fmt.Appendf(nil, `{"address":%q,"merchant_id":"KASSA0000000001","terminal_id":"TERM0001","acquirer_id":"12345",`+
		`"timeout":"5s","test":true,"tls":{"ca_file":%q,"cert_file":%q,"key_file":%q}}`, ln.Addr().String(), certFile, certFile, keyFile)
	if r, err := open(t, k, withTLS).Authorize(context.Background(), payment(t, "over-tls", cardtest.Visa, 1000, true)); err != nil || !r.Approved {
		t.Fatalf("Authorize over TLS = %+v, %v", r, err)
	}
	if handshakes.Load() != 1 {
		t.Errorf("%d TLS handshakes, want 1", handshakes.Load())
	}
	// Without the TLS settings, the same address is another host: a plain connection, which the TLS
	// front refuses.
	if _, err := open(t, k, config(ln.Addr().String(), "TERM0002", "300ms")).Authorize(context.Background(),
		payment(t, "plain", cardtest.Visa, 1000, true)); err == nil {
		t.Error("Authorize in plain TCP to a TLS host succeeded")
	}
}

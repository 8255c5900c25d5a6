package iso8583_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/processor/processortest"
)

// The conformance suite against kassa-acquirer's host, which was built from the profile alone: every
// decline class by the profile's test cards, the amounts the host refuses, retransmission, and an
// answer the host drops ending in a reversal it acknowledges.
func TestConformanceWithTheAcquirerHost(t *testing.T) {
	t.Parallel()
	h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	processortest.Run(t, open(t, k, config(h.Addr(), "TERM0001", "1s")), processortest.Config{Approve: cardtest.Visa,
		EnforcesAmounts: true, Silence: func() { h.DropNext(1) }})
}

// A mail or telephone order (the dashboard's virtual terminal) goes on the wire with POS condition
// 08 — "`59` e-commerce, `08` mail/telephone order, `02` recurring" — keyed (22 = 010) with its CVV2,
// and kassa-acquirer's host approves it and journals the condition as sent.
func TestMailOrderOnTheWire(t *testing.T) {
	t.Parallel()
	h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	k, _ := newKind(t, nil, iso8583.KindConfig{})
	p := open(t, k, config(h.Addr(), "TERM0001", "1s"))
	for _, tc := range []struct {
		ref       string
		mailOrder bool
		condition string
	}{{"T000000000000000MOTO", true, "08"}, {"T0000000000000000WEB", false, "59"}} {
		pay := payment(t, tc.ref, cardtest.Visa, 2500, true)
		pay.MailOrder = tc.mailOrder
		if r, err := p.Authorize(context.Background(), pay); err != nil || !r.Approved {
			t.Fatalf("sale %s: %+v, %v", tc.ref, r, err)
		}
		resp, err := http.Get("http://" + h.HTTPAddr() + "/journal?reference=" + tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		var entries []acquirer.Entry
		err = json.NewDecoder(resp.Body).Decode(&entries)
		resp.Body.Close()
		if err != nil || len(entries) != 1 {
			t.Fatalf("journal of %s: %+v, %v", tc.ref, entries, err)
		}
		if e := entries[0]; e.Condition != tc.condition || e.EntryMode != "010" || !e.CVV2 || e.MTI != "0200" {
			t.Errorf("mail order %v journaled as %s, condition %q, entry mode %q, CVV2 %v; want condition %s", tc.mailOrder, e.MTI,
				e.Condition, e.EntryMode, e.CVV2, tc.condition)
		}
	}
}

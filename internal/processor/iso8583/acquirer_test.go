package iso8583_test

import (
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

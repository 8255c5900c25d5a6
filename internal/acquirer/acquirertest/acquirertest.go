// Package acquirertest drives an ISO 8583 acquirer host in tests, as a terminal of the profile would:
// a raw client on an iso8583-connection connection, messages built field by field.
package acquirertest

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moov-io/iso8583"
	connection "github.com/moov-io/iso8583-connection"

	"github.com/kassapay/kassa/internal/acquirer"
)

// Fields are a message's fields by number, as the spec prints them; 0 is the MTI.
type Fields map[int]string

// Clone returns a copy of f.
func (f Fields) Clone() Fields {
	c := make(Fields, len(f))
	for id, v := range f {
		c[id] = v
	}
	return c
}

// Terminal is one terminal of one merchant on a connection of its own. Its STANs count up from a
// random start, so that terminals of one test do not collide.
type Terminal struct {
	TID, MID string
	conn     *connection.Connection
	stan     atomic.Int64
}

// seq numbers terminals, so that successive ones start their STANs apart; serial numbers references
// and RRNs.
var seq, serial atomic.Int64

// Dial connects a terminal to the host at addr and signs on. The connection closes when t ends.
func Dial(t testing.TB, addr string) *Terminal {
	t.Helper()
	term := Connect(t, addr)
	if a := term.Send(t, Fields{0: "0800", 24: "001"}); a[39] != "00" {
		t.Fatalf("sign-on answered %v", a)
	}
	return term
}

// Connect connects a terminal to the host at addr without signing on.
func Connect(t testing.TB, addr string) *Terminal {
	t.Helper()
	n := seq.Add(1)
	term := &Terminal{TID: fmt.Sprintf("T%07d", n), MID: fmt.Sprintf("M%014d", n)}
	term.stan.Store(n * 10000)
	conn, err := connection.New(addr, acquirer.Spec, acquirer.ReadLength, nil,
		connection.SetMessageWriter(acquirer.FrameWriter{}), connection.SendTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	term.conn = conn
	return term
}

// Send fills in what f lacks of fields 7, 11, 37, 41, 42 (not for an 0800), sends it and returns the
// answer; a failure ends the test.
func (term *Terminal) Send(t testing.TB, f Fields) Fields {
	t.Helper()
	a, err := term.Exchange(f, 0)
	if err != nil {
		t.Fatalf("%s: %v", f[0], err)
	}
	return a
}

// Exchange is Send that returns the error, such as connection.ErrSendTimeout when no answer came
// within timeout (0: ten seconds).
func (term *Terminal) Exchange(f Fields, timeout time.Duration) (Fields, error) {
	term.Fill(f)
	m := iso8583.NewMessage(acquirer.Spec)
	for id, v := range f {
		if err := m.Field(id, v); err != nil {
			return nil, fmt.Errorf("field %d: %w", id, err)
		}
	}
	var opts []connection.Option
	if timeout > 0 {
		opts = append(opts, connection.SendTimeout(timeout))
	}
	a, err := term.conn.Send(m, opts...)
	if err != nil {
		return nil, err
	}
	out := Fields{}
	for id, fl := range a.GetFields() {
		if id == 1 {
			continue
		}
		if out[id], err = fl.String(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Fill sets what f lacks of field 7 (now), 11 (the next STAN) and, for other than an 0800, 37, 41
// and 42. It changes f, so that sending f again is a retransmission.
func (term *Terminal) Fill(f Fields) {
	if f[7] == "" {
		f[7] = time.Now().UTC().Format("0102150405")
	}
	if f[11] == "" {
		f[11] = fmt.Sprintf("%06d", term.stan.Add(1)%1000000)
	}
	if f[0] == "0800" {
		return
	}
	if f[37] == "" {
		f[37] = fmt.Sprintf("%012d", serial.Add(1))
	}
	if f[41] == "" {
		f[41], f[42] = term.TID, term.MID
	}
}

// Reference returns a fresh value for field 62.
func Reference() string { return fmt.Sprintf("ref-%d", serial.Add(1)) }

// Purchase is an 0100 (authorization) or 0200 (sale) of amount minor units of CAD on card pan, keyed,
// e-commerce, with a CVV2, expiring in December 2030.
func (term *Terminal) Purchase(mti, pan string, amount int64) Fields {
	now := time.Now().UTC()
	return Fields{0: mti, 2: pan, 3: "000000", 4: amountField(amount), 12: now.Format("150405"), 13: now.Format("0102"),
		14: "3012", 22: "010", 25: "59", 48: "CV03123", 49: "124", 62: Reference()}
}

// Capture is an 0220 of amount against the authorization auth (as sent).
func (term *Terminal) Capture(auth Fields, amount int64) Fields {
	return Fields{0: "0220", 3: "000000", 4: amountField(amount), 49: auth[49], 62: Reference(), 90: Original(auth)}
}

// Refund is an 0200 refund of amount of the sale or capture paid (as sent).
func (term *Terminal) Refund(paid Fields, amount int64) Fields {
	return Fields{0: "0200", 3: "200000", 4: amountField(amount), 49: paid[49], 62: Reference(), 90: Original(paid)}
}

// Reversal is an 0400 of orig (as sent): a void of an authorization, or a timeout reversal. It
// carries orig's reference.
func (term *Terminal) Reversal(orig Fields) Fields {
	return Fields{0: "0400", 4: orig[4], 49: orig[49], 62: orig[62], 90: Original(orig)}
}

// Original is field 90 naming the message m (as sent): its MTI, STAN and field 7, acquirer id 1 and
// forwarding id 0.
func Original(m Fields) string {
	return m[0] + m[11] + m[7] + "00000000001" + "00000000000"
}

func amountField(minor int64) string { return fmt.Sprintf("%012d", minor) }

// Amount reads field 4 of an answer (printed without its leading zeros).
func Amount(f Fields) int64 {
	n, _ := strconv.ParseInt(f[4], 10, 64)
	return n
}

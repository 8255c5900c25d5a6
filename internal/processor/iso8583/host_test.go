package iso8583_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	moov "github.com/moov-io/iso8583"
	connection "github.com/moov-io/iso8583-connection"
	"github.com/moov-io/iso8583-connection/server"
	moovErrors "github.com/moov-io/iso8583/errors"

	"github.com/kassapay/kassa/internal/processor/iso8583"
)

// scripted is an acquirer host for the tests, on the iso8583-connection server: it records every
// message it receives with its bytes, and answers as the test's script says — by default as the
// profile's test host does (test cards, expired cards, 00 to follow-ups and network management).
type scripted struct {
	t    testing.TB
	srv  *server.Server
	addr string
	raw  sync.Map // *moov.Message → its bytes (after the length header), from the reader to the handler

	mu       sync.Mutex
	received []*wire
	forget   bool // keep no record of the messages (benchmarks)
	conns    []*connection.Connection
	script   func(w *wire) action
}

// wire is a message the host received.
type wire struct {
	conn int    // which connection it came on, 0 for the first
	raw  []byte // its bytes, without the 2-byte length header
	mti  string
	msg  *moov.Message
}

// get is field id of the message, "" when absent.
func (w *wire) get(id int) string {
	s, _ := w.msg.GetString(id)
	return s
}

// has reports whether the message carries field id.
func (w *wire) has(id int) bool { return w.msg.GetFields()[id] != nil }

// network reports whether the message is network management with function code function.
func (w *wire) network(function string) bool { return w.mti == "0800" && w.get(24) == function }

// action is how the host answers one message; the zero action is the default answer.
type action struct {
	code   string        // field 39 to answer; "" for the default decision
	after  time.Duration // answer this late
	silent bool          // never answer
	drop   bool          // close the connection instead of answering
	mti    string        // answer with this MTI instead of the request's plus 10
}

func newScripted(t testing.TB) *scripted {
	t.Helper()
	h := &scripted{t: t}
	h.srv = server.New(iso8583.Spec, readLength, writeLength,
		connection.SetMessageReader(h), connection.InboundMessageHandler(h.handle))
	if err := h.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	h.addr = h.srv.Addr
	t.Cleanup(h.srv.Close)
	return h
}

// setScript makes f decide the answers from now on (nil: the defaults).
func (h *scripted) setScript(f func(w *wire) action) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.script = f
}

// ReadMessage reads one framed message, checking the profile's framing itself: a 2-byte big-endian
// length, then the message.
func (h *scripted) ReadMessage(r io.Reader) (*moov.Message, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	raw := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	m := moov.NewMessage(iso8583.Spec)
	if err := m.Unpack(raw); err != nil {
		h.t.Errorf("the host cannot unpack %q: %v", raw, err)
		return nil, &moovErrors.UnpackError{Err: err, RawMessage: raw}
	}
	h.raw.Store(m, raw)
	return m, nil
}

func readLength(r io.Reader) (int, error) {
	var hdr [2]byte
	_, err := io.ReadFull(r, hdr[:])
	return int(binary.BigEndian.Uint16(hdr[:])), err
}

func writeLength(w io.Writer, n int) (int, error) {
	return w.Write(binary.BigEndian.AppendUint16(nil, uint16(n)))
}

func (h *scripted) handle(c *connection.Connection, m *moov.Message) {
	raw, _ := h.raw.LoadAndDelete(m)
	mti, _ := m.GetMTI()
	h.mu.Lock()
	idx := slices.Index(h.conns, c)
	if idx < 0 {
		h.conns = append(h.conns, c)
		idx = len(h.conns) - 1
	}
	w := &wire{conn: idx, raw: raw.([]byte), mti: mti, msg: m}
	if !h.forget {
		h.received = append(h.received, w)
	}
	script := h.script
	h.mu.Unlock()
	var a action
	if script != nil {
		a = script(w)
	}
	switch {
	case a.silent:
		return
	case a.drop:
		c.Close()
		return
	}
	time.Sleep(a.after)
	if a.code == "" {
		a.code = decision(w)
	}
	if a.mti == "" {
		a.mti = mti[:2] + string(mti[2]+1) + mti[3:]
	}
	resp := moov.NewMessage(iso8583.Spec)
	resp.MTI(a.mti)
	// "It echoes fields 11, 37, 41, 42 and 62 of the request."
	for _, id := range []int{11, 37, 41, 42, 62} {
		if v := w.get(id); v != "" {
			resp.Field(id, v)
		}
	}
	resp.Field(39, a.code)
	if a.code == "00" && (mti == "0100" || mti == "0200") {
		resp.Field(38, "A1B2C3")
	}
	if err := c.Reply(resp); err != nil {
		h.t.Logf("the host could not answer: %v", err)
	}
}

// decision is the profile's test host: by card number, expired cards 54, everything else 00.
func decision(w *wire) string {
	if (w.mti == "0100" || w.mti == "0200") && w.get(3) != "200000" {
		if code, ok := map[string]string{"4000000000000002": "05", "4000000000009995": "51", "4000000000000069": "54",
			"4000000000000127": "N7", "4000000000009987": "41", "4000000000009979": "43", "4000000000000119": "96"}[w.get(2)]; ok {
			return code
		}
		if w.get(14) < time.Now().UTC().Format("0601") {
			return "54"
		}
	}
	return "00"
}

// messages returns what the host received so far that keep selects (all when keep is nil).
func (h *scripted) messages(keep func(w *wire) bool) []*wire {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*wire
	for _, w := range h.received {
		if keep == nil || keep(w) {
			out = append(out, w)
		}
	}
	return out
}

// financial keeps the messages that are not network management.
func financial(w *wire) bool { return w.mti != "0800" }

// await waits until the host has received n messages that keep selects, and returns them.
func (h *scripted) await(n int, keep func(w *wire) bool) []*wire {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := h.messages(keep)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the host received %d such messages, want %d: %s", len(got), n, describe(h.messages(nil)))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connections is how many connections the host has seen messages on.
func (h *scripted) connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

func describe(ws []*wire) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "\n  conn %d: %s", w.conn, w.raw)
	}
	return b.String()
}

// closedAddress is an address where nothing listens.
func closedAddress(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

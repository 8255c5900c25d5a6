package acquirer

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/moov-io/iso8583"
	connection "github.com/moov-io/iso8583-connection"
	"github.com/moov-io/iso8583/encoding"
	iso8583errors "github.com/moov-io/iso8583/errors"
	"github.com/moov-io/iso8583/field"
	"github.com/moov-io/iso8583/network"
	"github.com/moov-io/iso8583/prefix"
	"github.com/moov-io/iso8583/specs"
)

// Spec is the profile's encoding: "the field definitions of moov-io/iso8583's specs.Spec87ASCII
// (v0.26.1): MTI 4 ASCII digits, bitmap as 16 hex characters per 64 fields (a secondary bitmap when
// field 90 is present)". Spec87ASCII's own bitmap is one fixed field of 32 hex characters in every
// message; the profile's is 16, followed by 16 more, and bit 1 set, only when a field above 64 is
// present: so the fields are Spec87ASCII's, and the bitmap the one that expands.
var Spec = func() *iso8583.MessageSpec {
	fields := maps.Clone(specs.Spec87ASCII.Fields)
	fields[1] = field.NewBitmap(&field.Spec{Length: 8, Description: "Bitmap", Enc: encoding.BytesToASCIIHex, Pref: prefix.Hex.Fixed})
	return &iso8583.MessageSpec{Name: "ISO 8583 1987 ASCII, the acquirer profile", Fields: fields}
}()

// ReadLength reads the profile's frame header, "the length as a 2-byte unsigned big-endian integer",
// and returns the length of the message that follows.
func ReadLength(r io.Reader) (int, error) {
	h := network.NewBinary2BytesHeader()
	_, err := h.ReadFrom(r)
	return h.Length(), err
}

// FrameWriter writes a message behind its frame header in one write, so that a message is one TCP
// segment (with TCP_NODELAY, a header written alone would be a segment of its own).
type FrameWriter struct{}

// WriteMessage packs m and writes it framed to w.
func (FrameWriter) WriteMessage(w io.Writer, m *iso8583.Message) error {
	frame, err := appendFrame(nil, m)
	if err == nil {
		_, err = w.Write(frame)
	}
	return err
}

// appendFrame appends m, packed behind its frame header, to buf.
func appendFrame(buf []byte, m *iso8583.Message) ([]byte, error) {
	packed, err := m.Pack()
	if err != nil {
		return buf, err
	}
	h := network.NewBinary2BytesHeader()
	if err := h.SetLength(len(packed)); err != nil {
		return buf, err
	}
	w := bytes.NewBuffer(buf)
	h.WriteTo(w)
	w.Write(packed)
	return w.Bytes(), nil
}

// connection wraps a connection accepted by the listener, with its own session.
func (h *Host) connection(conn net.Conn) (*connection.Connection, error) {
	s := &session{}
	return connection.NewFrom(conn, Spec, ReadLength, nil, connection.SetMessageWriter(FrameWriter{}),
		connection.InboundMessageHandler(func(c *connection.Connection, m *iso8583.Message) { h.handle(s, c, m) }),
		connection.ErrorHandler(func(err error) { h.connectionError(conn, err) }))
}

// connectionError logs what the connection could not handle: a message that does not unpack (it
// cannot be answered: its STAN is unknown), or the end of the connection.
func (h *Host) connectionError(conn net.Conn, err error) {
	peer := conn.RemoteAddr().String()
	var unpack *iso8583errors.UnpackError
	if errors.As(err, &unpack) {
		// Only the field numbers: the error's text may quote the field, a PAN among them.
		h.log.Warn("a message that does not unpack, not answered", "peer", peer, "fields", unpack.FieldIDs())
		return
	}
	h.log.Info("iso 8583 connection", "peer", peer, "err", err)
}

// handle answers one request. It runs on its own goroutine, so that many requests of a connection
// are in flight at once; their answers go out as each is ready, matched by STAN.
func (h *Host) handle(s *session, c *connection.Connection, m *iso8583.Message) {
	h.closeMu.Lock()
	if h.closed {
		h.closeMu.Unlock()
		return
	}
	h.inflight.Add(1)
	h.closeMu.Unlock()
	defer h.inflight.Done()

	start := time.Now()
	mti, _ := m.GetMTI()
	if !isRequest(mti) {
		h.log.Info("not a request, ignored", "mti", mti)
		return
	}
	r := parse(m)
	e, b := h.process(s, r)
	if b != nil {
		<-b.done
		if b.err != nil {
			return // not durable, so not answered
		}
	}
	if wait := time.Duration(h.latency.Load()) - time.Since(start); wait > 0 {
		time.Sleep(wait)
	}
	if e.Dropped {
		return
	}
	err := answer(m, e)
	if err == nil {
		err = s.out.send(c, m)
	}
	if err != nil {
		h.log.Info("answer not sent", "entry", e.ID, "err", err)
	}
}

// session is the state of one connection: whether it has signed on (guarded by Host.mu), and its
// outbox.
type session struct {
	signedOn bool
	out      outbox
}

// outbox sends a connection's answers. The answers that become ready while a write is under way go
// out together in the next one: a commit releases a batch of answers at once, and they cost a few
// writes, not one each.
type outbox struct {
	mu      sync.Mutex
	pending []byte
	spare   []byte
	writing bool
}

// send frames m and sends it, with whatever else is pending, or leaves it to the write under way.
func (o *outbox) send(c *connection.Connection, m *iso8583.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	if o.pending, err = appendFrame(o.pending, m); err != nil || o.writing {
		return err
	}
	o.writing = true
	for len(o.pending) > 0 {
		buf := o.pending
		o.pending = o.spare[:0]
		o.mu.Unlock()
		_, werr := c.Write(buf)
		o.mu.Lock()
		o.spare = buf
		if err == nil {
			err = werr
		}
	}
	o.writing = false
	return err
}

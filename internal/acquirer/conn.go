package acquirer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
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

// connection wraps a connection accepted by the listener, with its own session, which reads its
// requests.
func (h *Host) connection(conn net.Conn) (*connection.Connection, error) {
	s := &session{host: h, ready: make(chan struct{})}
	defer close(s.ready)
	c, err := connection.NewFrom(conn, Spec, ReadLength, nil, connection.SetMessageReader(s),
		connection.ErrorHandler(func(err error) { h.connectionError(conn, err) }))
	s.conn = c
	return c, err
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

// session is the state of one connection: whether it has signed on (guarded by Host.mu), and its
// outbox.
type session struct {
	host  *Host
	conn  *connection.Connection
	ready chan struct{} // closed once conn is set
	// signedOn: the connection has signed on, and not off since (guarded by Host.mu).
	signedOn bool
	out      outbox
}

// ReadMessage reads a request from the connection and hands it to the host (connection.MessageReader):
// it is decided and journaled at once, in the connection's reader, and answered once its journal
// entry has committed. Many requests of a connection are in flight at once, without a goroutine each;
// their answers go out as each batch commits, matched by STAN. The connection is given nothing
// (nil), except for a message that does not unpack: its error, which the connection reports before
// reading on.
func (s *session) ReadMessage(r io.Reader) (*iso8583.Message, error) {
	<-s.ready
	// The requests read together (a sender writes those it has at once) are journaled together: the
	// journal commits once the reader has no whole message left in hand, whatever became of this one.
	defer func() {
		if !another(r) {
			s.host.journal.flush()
		}
	}()
	n, err := ReadLength(r)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	m := iso8583.NewMessage(Spec)
	if err := m.Unpack(raw); err != nil {
		return nil, err
	}
	s.host.receive(s, m)
	return nil, nil
}

// another reports whether r, the connection's buffered reader, holds a whole message already: the next
// read will not wait for the sender.
func another(r io.Reader) bool {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Buffered() < 2 {
		return false
	}
	hdr, _ := br.Peek(2) // buffered: Peek does not read
	return br.Buffered() >= 2+int(binary.BigEndian.Uint16(hdr))
}

// receive decides the request m, journals it, and has it answered once journaled.
func (h *Host) receive(s *session, m *iso8583.Message) {
	received := time.Now()
	mti, _ := m.GetMTI()
	if !isRequest(mti) {
		h.log.Info("not a request, ignored", "mti", mti)
		return
	}
	h.closeMu.Lock()
	if h.closed {
		h.closeMu.Unlock()
		return
	}
	h.inflight.Add(1)
	h.closeMu.Unlock()
	a := &reply{s: s, m: m, received: received}
	if e := h.process(s, parse(m), a); e.ID == 0 {
		h.answer([]*reply{a}) // the journal failed: refused, not journaled
	}
}

// reply is a request to answer once its journal entry has committed.
type reply struct {
	s        *session
	m        *iso8583.Message // the request, made into its answer
	e        *Entry
	received time.Time
}

// committed answers the requests of a batch of the journal, once it has committed (err nil), in the
// reader that committed it. A batch that did not commit is not answered: what it decided is not
// durable.
func (h *Host) committed(as []*reply, err error) {
	if err != nil {
		for range as {
			h.inflight.Done()
		}
		return
	}
	h.answer(as)
}

// answer sends the answers to as, each once the host's latency has passed since it was received, those
// of a connection due together in one write.
func (h *Host) answer(as []*reply) {
	latency := time.Duration(h.latency.Load())
	var due []*reply
	for _, a := range as {
		if wait := latency - time.Since(a.received); wait > 0 {
			time.AfterFunc(wait, func() { h.answer([]*reply{a}) })
			continue
		}
		due = append(due, a)
	}
	var sessions []*session
	for _, a := range due {
		if !a.e.Dropped {
			if err := a.s.out.add(a.m, a.e); err != nil {
				h.log.Info("answer not sent", "entry", a.e.ID, "err", err)
			} else if !slices.Contains(sessions, a.s) {
				sessions = append(sessions, a.s)
			}
		}
	}
	for _, s := range sessions {
		if err := s.out.flush(s.conn); err != nil {
			h.log.Info("answers not sent", "err", err)
		}
	}
	for range due {
		h.inflight.Done()
	}
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

// add turns the request m into its answer, carrying e's, and queues it.
func (o *outbox) add(m *iso8583.Message, e *Entry) error {
	if err := answer(m, e); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	o.pending, err = appendFrame(o.pending, m)
	return err
}

// flush writes what is queued, unless a write is under way: that one goes on until nothing is queued.
func (o *outbox) flush(c *connection.Connection) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writing {
		return nil
	}
	o.writing = true
	var err error
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

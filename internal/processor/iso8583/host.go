package iso8583

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	moov "github.com/moov-io/iso8583"
	connection "github.com/moov-io/iso8583-connection"
	"github.com/moov-io/iso8583/encoding"
	"github.com/moov-io/iso8583/field"
	"github.com/moov-io/iso8583/network"
	"github.com/moov-io/iso8583/prefix"
	"github.com/moov-io/iso8583/specs"
)

// host is the one connection to an acquirer host that the accounts on it share. Its goroutine (run)
// connects, signs on, publishes the connection, and after a drop reconnects with exponential backoff
// and jitter. Requests wait for a signed-on connection within their timeout.
type host struct {
	addr string
	tls  *tls.Config // nil: plain TCP
	cfg  KindConfig
	log  *slog.Logger

	mu      sync.Mutex
	conn    *link         // signed on; nil while there is none
	changed chan struct{} // closed when conn changes

	netSTAN atomic.Int64

	stop chan struct{}
	done chan struct{}
}

func newHost(k *Kind, addr string, tlsConfig *tls.Config) *host {
	h := &host{addr: addr, tls: tlsConfig, cfg: k.cfg, log: k.log.With("acquirer_host", addr),
		changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	// Network management messages carry no terminal id, so their STANs are the connection's own: a
	// random start keeps two nodes signing on in the same second from sending the same fields 7 and 11.
	h.netSTAN.Store(rand.Int64N(999999))
	go h.run()
	return h
}

// run keeps the host connected until close.
func (h *host) run() {
	defer close(h.done)
	failures := 0
	for {
		l, err := h.connect()
		if err != nil {
			h.log.Warn("iso8583: cannot connect to the acquirer host", "attempt", failures+1, "err", err)
			failures++
		} else {
			failures = 0
			h.publish(l)
			h.log.Info("iso8583: connected and signed on to the acquirer host")
			select {
			case <-l.failed:
				h.publish(nil)
				h.log.Warn("iso8583: connection to the acquirer host lost; reconnecting")
			case <-h.stop:
				h.publish(nil)
				// Sign off (function code 002) before an orderly close; the host's answer changes nothing.
				if err := h.network(l, "002"); err != nil {
					h.log.Warn("iso8583: sign-off", "err", err)
				}
				l.close() // waits for the requests in flight
				return
			}
		}
		t := time.NewTimer(h.backoff(failures))
		select {
		case <-t.C:
		case <-h.stop:
			t.Stop()
			return
		}
	}
}

// backoff is the wait before a reconnection attempt after failures failed ones: ReconnectMin doubled
// per failure up to ReconnectMax, drawn between its half and its whole so that the nodes of a cluster
// that lost the host together do not come back in step.
func (h *host) backoff(failures int) time.Duration {
	d := h.cfg.ReconnectMin
	for range failures {
		if d *= 2; d >= h.cfg.ReconnectMax {
			d = h.cfg.ReconnectMax
			break
		}
	}
	return d/2 + rand.N(d/2+1)
}

// link is a connection to the host, what tells that it failed, and the requests exchanged on it.
//
// The library's connection dials, reads, writes and fails the connection, and sends an echo test when
// it has written nothing for a while; the link matches answers to requests itself. Requests are
// packed by their callers and written together by the link's writer: the messages queued while a write
// is under way go out in the next one, one write for many (the answers the host releases together come
// back the same way, read through the connection's buffered reader). An answer is handed by the
// connection's reader to the caller waiting for it, with no goroutine in between.
type link struct {
	*connection.Connection
	failed chan struct{} // closed when the connection fails or closes
	once   sync.Once
	wake   chan struct{} // the writer has requests to write

	mu sync.Mutex
	// inflight are the requests awaiting an answer, by request ID (see requestID), from when they are
	// queued until they are answered or their caller gives up.
	inflight map[string]*pending
	queue    []*pending // to write, in order
	spare    []*pending
	closing  bool           // no request is taken any more
	requests sync.WaitGroup // the exchanges under way, which close waits for
}

func (l *link) fail() { l.once.Do(func() { close(l.failed) }) }

// down reports whether the connection has failed or closed.
func (l *link) down() bool {
	select {
	case <-l.failed:
		return true
	default:
		return false
	}
}

// connect dials the host and signs on (0800, function code 001): "sign-on after every connect", before
// any financial message, which cannot be sent before the connection is published.
func (h *host) connect() (*link, error) {
	l := &link{failed: make(chan struct{}), wake: make(chan struct{}, 1), inflight: map[string]*pending{}}
	c, err := connection.New(h.addr, Spec, readLength, writeLength,
		connection.ConnectTimeout(h.cfg.NetworkTimeout),
		// "Echo after 30 s idle": the connection calls echo when it has written nothing for IdleTime.
		connection.IdleTime(h.cfg.EchoInterval),
		connection.PingHandler(func(*connection.Connection) { h.echo(l) }),
		// Answers go from the reader to their callers (ReadMessage); the connection hands on the rest.
		connection.SetMessageReader(l),
		connection.InboundMessageHandler(h.unmatched),
		connection.ErrorHandler(h.connectionError),
		connection.WithConnectionFailedHandler(func(*connection.Connection, error) { l.fail() }),
		connection.WithConnectionClosedHandler(func(*connection.Connection) { l.fail() }),
		func(o *connection.Options) error { o.TLSConfig = h.tls; return nil },
	)
	if err != nil {
		return nil, err
	}
	l.Connection = c
	if err := c.Connect(); err != nil {
		return nil, err
	}
	go l.writer()
	if err := h.network(l, "001"); err != nil {
		l.close()
		return nil, fmt.Errorf("sign-on: %w", err)
	}
	return l, nil
}

// publish makes l the connection requests use (nil: none) and wakes those waiting for one.
func (h *host) publish(l *link) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conn = l
	close(h.changed)
	h.changed = make(chan struct{})
}

// online waits for a signed-on connection until deadline, while ctx lasts.
func (h *host) online(ctx context.Context, deadline time.Time) (*link, error) {
	var timeout <-chan time.Time
	for {
		h.mu.Lock()
		l, changed := h.conn, h.changed
		h.mu.Unlock()
		if l != nil && !l.down() { // one that failed is about to be replaced
			return l, nil
		}
		if timeout == nil {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("iso8583: not connected to the acquirer host %s: %w", h.addr, ctx.Err())
		case <-timeout:
			return nil, fmt.Errorf("iso8583: not connected to the acquirer host %s: %w", h.addr, context.DeadlineExceeded)
		}
	}
}

// close signs off and closes the connection, and stops reconnecting.
func (h *host) close() {
	close(h.stop)
	<-h.done
}

// echo sends an echo test (0800, function code 301); a host that does not answer it is taken for
// gone: the connection is failed and made again.
func (h *host) echo(l *link) {
	if err := h.network(l, "301"); err != nil {
		h.log.Warn("iso8583: echo test failed; reconnecting", "err", err)
		l.TriggerFailure(fmt.Errorf("echo test: %w", err))
	}
}

// network sends a network management message (0800 with fields 7, 11 and 24) and checks that the host
// answered it with 39 = 00.
func (h *host) network(l *link, function string) error {
	msg := moov.NewMessage(Spec)
	msg.MTI("0800")
	stan := stanOf(h.netSTAN.Add(1))
	if err := setFields(msg, &fields{7: h.cfg.Now().UTC().Format("0102150405"), 11: stan, 24: function}); err != nil {
		return err
	}
	resp, err := h.exchange(context.Background(), l, msg, time.Now().Add(h.cfg.NetworkTimeout))
	if err != nil {
		return err
	}
	if code, _ := resp.GetString(39); code != "00" {
		return fmt.Errorf("the host answered function %s with response code %q", function, code)
	}
	return nil
}

// unmatched logs a message from the host that no request awaits: most often the answer to a request
// given up at its timeout (to be reversed, or already reversed), which is ignored.
func (h *host) unmatched(_ *connection.Connection, m *moov.Message) {
	mti, _ := m.GetMTI()
	stan, _ := m.GetString(11)
	terminal, _ := m.GetString(41)
	code, _ := m.GetString(39)
	what := "iso8583: answer to a request no longer awaited (given up at its timeout), ignored"
	if len(mti) == 4 && (mti[2]-'0')%2 == 0 {
		what = "iso8583: request from the acquirer host, ignored"
	}
	h.log.Warn(what, "mti", mti, "stan", stan, "terminal_id", terminal, "response_code", code)
}

func (h *host) connectionError(err error) { h.log.Warn("iso8583: connection", "err", err) }

// States of a request in send.
const (
	queued    int32 = iota // handed to the link, not written yet
	written                // written to the host (maybe partly): it may have been received
	abandoned              // its caller gave up before it was written: it never will be
)

// pending is a request in send.
type pending struct {
	id     string
	frame  []byte // the packed message behind its length header
	state  atomic.Int32
	answer chan *moov.Message // the host's answer, from the reader; buffered
}

// noAnswer is send's error for a request that may have reached the host but got no usable answer:
// its outcome is unknown, and it is undone by a reversal.
type noAnswer struct{ err error }

func (e *noAnswer) Error() string { return "iso8583: no answer: " + e.err.Error() }
func (e *noAnswer) Unwrap() error { return e.err }

// send sends a request and waits for its answer, within timeout and while ctx lasts. Its error is a
// *noAnswer when the request was written to the host and no usable answer came in time (the
// timeout, ctx ended, the connection failed, an answer of the wrong type or without field 39);
// any other error means that the request was not written and never will be: not connected within the
// timeout, ctx ended first, or the same request still in flight (a retransmission must wait for the
// previous sending's caller to be done with it, or one answer would go to two callers).
// A request that a connection failed before taking goes on the next connection, within the timeout.
func (h *host) send(ctx context.Context, msg *moov.Message, timeout time.Duration) (*moov.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.online(ctx, deadline)
		if err != nil {
			return nil, err
		}
		m, err := h.exchange(ctx, l, msg, deadline)
		var na *noAnswer
		if err != nil && !errors.As(err, &na) && l.down() && ctx.Err() == nil && time.Now().Before(deadline) {
			continue // the connection failed before it took the request: the next one will
		}
		return m, err
	}
}

// timers are exchange's, reused: a timer a message was a fifth of what the connector allocated, and
// what a sale allocates is paid again by the garbage collector.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// exchange sends msg on l and waits for its answer until deadline, while ctx lasts and l stands, with
// send's errors.
func (h *host) exchange(ctx context.Context, l *link, msg *moov.Message, deadline time.Time) (*moov.Message, error) {
	id, err := requestID(msg)
	if err != nil {
		return nil, err
	}
	frame, err := pack(msg)
	if err != nil {
		return nil, fmt.Errorf("iso8583: request not sent: %w", err)
	}
	p := &pending{id: id, frame: frame, answer: make(chan *moov.Message, 1)}
	if err := l.enqueue(p); err != nil {
		return nil, err
	}
	defer l.requests.Done()
	timer := timers.Get().(*time.Timer)
	timer.Reset(time.Until(deadline))
	defer func() {
		timer.Stop() // since Go 1.23 (go.mod), a stopped timer's channel holds no stale tick
		timers.Put(timer)
	}()
	var a *moov.Message
	var why error
	select {
	case a = <-p.answer:
	case <-ctx.Done():
		why = ctx.Err()
	case <-l.failed:
		why = connection.ErrConnectionClosed
	case <-timer.C:
		why = connection.ErrSendTimeout
	}
	if why != nil {
		// Given up: the reader no longer finds p, and an answer it handed over meanwhile is taken.
		l.forget(p)
		select {
		case a = <-p.answer:
		default:
			// A request not written yet never will be; one written may have been received.
			if p.state.CompareAndSwap(queued, abandoned) {
				return nil, fmt.Errorf("iso8583: request not sent: %w", why)
			}
			return nil, &noAnswer{why}
		}
	}
	mti, _ := msg.GetMTI()
	got, _ := a.GetMTI()
	if code, _ := a.GetString(39); got != answerMTI(mti) || code == "" {
		return nil, &noAnswer{fmt.Errorf("unusable answer %s to %s (response code %q)", got, mti, code)}
	}
	return a, nil
}

// enqueue takes p for writing and answering; its caller calls l.requests.Done once done with it. It
// refuses p, unsent, when the link is closing or a request of the same ID awaits its answer.
func (l *link) enqueue(p *pending) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return fmt.Errorf("iso8583: request not sent: %w", connection.ErrConnectionClosed)
	}
	if _, dup := l.inflight[p.id]; dup {
		return fmt.Errorf("iso8583: request %s is still in flight", p.id)
	}
	l.inflight[p.id] = p
	l.queue = append(l.queue, p)
	l.requests.Add(1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// forget stops awaiting p's answer.
func (l *link) forget(p *pending) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[p.id] == p {
		delete(l.inflight, p.id)
	}
}

// writer writes the queued requests until the connection fails: all those queued at once in one
// write, each marked written just before, leaving out those whose callers gave up first.
func (l *link) writer() {
	var buf []byte
	for {
		select {
		case <-l.wake:
		case <-l.failed:
			return
		}
		l.mu.Lock()
		q := l.queue
		l.queue, l.spare = l.spare[:0], nil
		l.mu.Unlock()
		buf = buf[:0]
		for _, p := range q {
			if p.state.CompareAndSwap(queued, written) {
				buf = append(buf, p.frame...)
			}
		}
		clear(q)
		l.mu.Lock()
		l.spare = q
		l.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		// A write that fails fails the connection, and its requests' callers learn it from failed.
		if _, err := l.Write(buf); err != nil {
			return
		}
	}
}

// ReadMessage reads a message from the host (connection.MessageReader): an answer is handed to the
// caller awaiting it, and the connection is given only the others (nil for an answer handed over), to
// pass to unmatched.
func (l *link) ReadMessage(r io.Reader) (*moov.Message, error) {
	n, err := readLength(r)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, err
	}
	m := moov.NewMessage(Spec)
	if err := m.Unpack(raw); err != nil {
		return nil, err
	}
	mti, _ := m.GetMTI()
	if len(mti) != 4 || (mti[2]-'0')%2 == 0 {
		return m, nil // not an answer
	}
	id, err := requestID(m)
	if err != nil {
		return m, nil
	}
	l.mu.Lock()
	p := l.inflight[id]
	if p != nil {
		delete(l.inflight, id)
	}
	l.mu.Unlock()
	if p == nil {
		return m, nil
	}
	p.answer <- m // the one answer p gets: it is no longer in inflight
	return nil, nil
}

// close stops taking requests, waits for those under way, and closes the connection.
func (l *link) close() {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.requests.Wait()
	l.Close()
}

// pack packs msg behind its length header.
func pack(msg *moov.Message) ([]byte, error) {
	packed, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(2 + len(packed))
	if _, err := writeLength(&buf, len(packed)); err != nil {
		return nil, err
	}
	buf.Write(packed)
	return buf.Bytes(), nil
}

// answerMTI is the MTI of the answer to a request: "the host answers each request with the MTI plus
// 10" (0100 → 0110).
func answerMTI(mti string) string {
	if len(mti) != 4 {
		return ""
	}
	return mti[:2] + string(mti[2]+1) + mti[3:]
}

// requestID identifies a request and its answer: the class of its MTI (the request's, 0100 for 0100
// and 0110), field 41 (absent from network management messages) and field 11, which the host echoes.
func requestID(m *moov.Message) (string, error) {
	mti, _ := m.GetMTI()
	stan, _ := m.GetString(11)
	terminal, _ := m.GetString(41)
	if len(mti) != 4 || stan == "" {
		return "", fmt.Errorf("iso8583: message %q without MTI or STAN", mti)
	}
	return mti[:2] + string(mti[2]&^1) + mti[3:] + " " + terminal + " " + stan, nil
}

// Spec is the profile's encoding: "the field definitions of moov-io/iso8583's specs.Spec87ASCII
// (v0.26.1): MTI 4 ASCII digits, bitmap as 16 hex characters per 64 fields (a secondary bitmap when
// field 90 is present)". Spec87ASCII itself defines the bitmap as one fixed 128-bit field (32 hex
// characters in every message, bit 1 never set), so its bitmap is replaced by the 64-bit one that
// expands to a secondary bitmap, setting bit 1, when a field above 64 is present.
var Spec = func() *moov.MessageSpec {
	fields := maps.Clone(specs.Spec87ASCII.Fields)
	fields[1] = field.NewBitmap(&field.Spec{Length: 8, Description: "Bitmap", Enc: encoding.BytesToASCIIHex, Pref: prefix.Hex.Fixed})
	return &moov.MessageSpec{Name: "Kassa acquirer profile (ISO 8583 1987 ASCII)", Fields: fields}
}()

// readLength and writeLength are the profile's framing: "every message is preceded by its length as a
// 2-byte unsigned big-endian integer".
func readLength(r io.Reader) (int, error) {
	h := network.NewBinary2BytesHeader()
	if _, err := h.ReadFrom(r); err != nil {
		return 0, err
	}
	return h.Length(), nil
}

func writeLength(w io.Writer, n int) (int, error) {
	h := network.NewBinary2BytesHeader()
	if err := h.SetLength(n); err != nil {
		return 0, err
	}
	return h.WriteTo(w)
}

// fields are a message's data fields by number, "" for those it does not carry: an array, where a map
// was a kilobyte more to allocate for every message.
type fields [129]string

// setFields sets the fields of msg that f holds.
func setFields(msg *moov.Message, f *fields) error {
	for id, v := range f {
		if v == "" {
			continue
		}
		if err := msg.Field(id, v); err != nil {
			return fmt.Errorf("iso8583: field %d: %w", id, err)
		}
	}
	return nil
}

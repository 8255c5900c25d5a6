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
	moovErrors "github.com/moov-io/iso8583/errors"
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
				l.Close() // waits for the requests in flight
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

// link is a connection to the host, and what tells that it failed.
type link struct {
	*connection.Connection
	failed chan struct{} // closed when the connection fails or closes
	once   sync.Once
	// inflight are the requests exchanged on the connection, by request ID (see requestID), until
	// it is done with them: the writer marks each written, or leaves out one whose caller gave up
	// first.
	inflight sync.Map // string → *pending
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
	l := &link{failed: make(chan struct{})}
	c, err := connection.New(h.addr, Spec, readLength, writeLength,
		connection.ConnectTimeout(h.cfg.NetworkTimeout),
		// "Echo after 30 s idle": the connection calls echo when it has written nothing for IdleTime.
		connection.IdleTime(h.cfg.EchoInterval),
		connection.PingHandler(func(*connection.Connection) { h.echo(l) }),
		connection.InboundMessageHandler(h.unmatched),
		connection.ErrorHandler(h.connectionError),
		connection.SetMessageWriter(l),
		// The library matches answers by field 11 alone; accounts of several terminals share this
		// connection and STANs are unique per terminal only, so answers are matched by MTI class,
		// field 41 and field 11.
		connection.SetRequestIDGenerator(requestIDs{}),
		// The library closes a failed connection only once every request in flight has been told,
		// and a request it took as the connection failed waits for its timeout; failed does not wait.
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
	if err := h.network(l, "001"); err != nil {
		c.Close()
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

// online waits for a signed-on connection until ctx is done.
func (h *host) online(ctx context.Context) (*link, error) {
	for {
		h.mu.Lock()
		l, changed := h.conn, h.changed
		h.mu.Unlock()
		if l != nil && !l.down() { // one that failed is about to be replaced
			return l, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("iso8583: not connected to the acquirer host %s: %w", h.addr, ctx.Err())
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
	if err := setFields(msg, map[int]string{7: h.cfg.Now().UTC().Format("0102150405"), 11: stan, 24: function}); err != nil {
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

func (h *host) connectionError(err error) {
	if errors.Is(err, errAbandoned) {
		return // a request whose caller gave up before it was written (see send)
	}
	h.log.Warn("iso8583: connection", "err", err)
}

// States of a request in send.
const (
	queued    int32 = iota // handed to the connection, not written yet
	written                // written to the host (maybe partly): it may have been received
	abandoned              // its caller gave up before it was written: it never will be
)

// pending is a request in send.
type pending struct {
	state     atomic.Int32
	delivered atomic.Bool // its answer (or error) went to its caller, or its caller stopped waiting
}

// errAbandoned keeps a request whose caller gave up from being written. The connection treats it as a
// packing error: it tells the request and goes on with the next.
var errAbandoned = errors.New("iso8583: request given up before it was written")

// WriteMessage writes a message with its length header in one write, after marking it written; one
// whose caller already gave up is not written (connection.MessageWriter).
func (l *link) WriteMessage(w io.Writer, msg *moov.Message) error {
	packed, err := msg.Pack()
	if err != nil {
		return err
	}
	if id, err := requestID(msg); err == nil {
		if p, ok := l.inflight.Load(id); ok && !p.(*pending).state.CompareAndSwap(queued, written) {
			return &moovErrors.PackError{Err: errAbandoned}
		}
	}
	var buf bytes.Buffer
	if _, err := writeLength(&buf, len(packed)); err != nil {
		return &moovErrors.PackError{Err: err}
	}
	buf.Write(packed)
	_, err = w.Write(buf.Bytes())
	return err
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
// connection to be done with the previous sending, whose answer would otherwise be taken for its own).
// A request that a connection failed before taking goes on the next connection, within the timeout.
func (h *host) send(ctx context.Context, msg *moov.Message, timeout time.Duration) (*moov.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	connected, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		l, err := h.online(connected)
		if err != nil {
			return nil, err
		}
		m, err := h.exchange(ctx, l, msg, deadline)
		var na *noAnswer
		if err != nil && !errors.As(err, &na) && l.down() && connected.Err() == nil {
			continue // the connection failed before it took the request: the next one will
		}
		return m, err
	}
}

// exchange sends msg on l and waits for its answer until deadline, while ctx lasts and l stands, with
// send's errors.
func (h *host) exchange(ctx context.Context, l *link, msg *moov.Message, deadline time.Time) (*moov.Message, error) {
	id, err := requestID(msg)
	if err != nil {
		return nil, err
	}
	p := &pending{}
	if _, dup := l.inflight.LoadOrStore(id, p); dup {
		return nil, fmt.Errorf("iso8583: request %s is still in flight", id)
	}
	answers := make(chan answer, 1)
	go func() {
		// The connection ends the wait at the deadline. The entry stays until it is done with the
		// request, so that the writer still finds it abandoned after its caller has gone.
		m, err := l.Send(msg, connection.SendTimeout(time.Until(deadline)))
		l.inflight.Delete(id)
		if p.delivered.CompareAndSwap(false, true) {
			answers <- answer{m, err}
		} else if m != nil {
			h.unmatched(l.Connection, m)
		}
	}()
	// The connection's own timer starts once it has taken the request; this one bounds a request it
	// never takes.
	stuck := time.NewTimer(time.Until(deadline) + time.Second)
	defer stuck.Stop()
	var a answer
	select {
	case a = <-answers:
	case <-ctx.Done():
		a = giveUp(p, answers, ctx.Err())
	case <-l.failed:
		a = giveUp(p, answers, connection.ErrConnectionClosed)
	case <-stuck.C:
		a = giveUp(p, answers, connection.ErrSendTimeout)
	}
	if a.err != nil {
		// A request not written yet never will be; one written may have been received.
		if p.state.CompareAndSwap(queued, abandoned) {
			return nil, fmt.Errorf("iso8583: request not sent: %w", a.err)
		}
		return nil, &noAnswer{a.err}
	}
	mti, _ := msg.GetMTI()
	got, _ := a.m.GetMTI()
	if code, _ := a.m.GetString(39); got != answerMTI(mti) || code == "" {
		return nil, &noAnswer{fmt.Errorf("unusable answer %s to %s (response code %q)", got, mti, code)}
	}
	return a.m, nil
}

// answer is what the connection made of a request: the host's answer, or why there is none.
type answer struct {
	m   *moov.Message
	err error
}

// giveUp stops waiting for p's answer for reason err, unless the answer is being delivered: then it
// waits for it.
func giveUp(p *pending, answers <-chan answer, err error) answer {
	if p.delivered.CompareAndSwap(false, true) {
		return answer{err: err}
	}
	return <-answers
}

// answerMTI is the MTI of the answer to a request: "the host answers each request with the MTI plus
// 10" (0100 → 0110).
func answerMTI(mti string) string {
	if len(mti) != 4 {
		return ""
	}
	return mti[:2] + string(mti[2]+1) + mti[3:]
}

// requestIDs matches answers to requests (connection.RequestIDGenerator).
type requestIDs struct{}

func (requestIDs) GenerateRequestID(m *moov.Message) (string, error) { return requestID(m) }

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

// setFields sets fields of msg.
func setFields(msg *moov.Message, fields map[int]string) error {
	for id, v := range fields {
		if err := msg.Field(id, v); err != nil {
			return fmt.Errorf("iso8583: field %d: %w", id, err)
		}
	}
	return nil
}

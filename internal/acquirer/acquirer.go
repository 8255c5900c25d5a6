// Package acquirer is an acquirer host that speaks Kassa's ISO 8583 profile (1987 ASCII fields,
// 2-byte length framing, many requests in flight on a connection matched by STAN): what Kassa's
// ISO 8583 connector is tested and benchmarked against, and a tool to try a connector before going
// live. It decides by the profile's test cards, keeps a durable journal of every request and answer,
// answers retransmissions with their first answer, honours reversals, refuses over-captures and
// over-refunds, can withhold a share of its answers to make timeouts happen, and serves the day's
// settlement report over HTTP.
package acquirer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moov-io/iso8583-connection/server"

	"github.com/kassapay/kassa/internal/private"
)

// Config configures a Host.
type Config struct {
	// Addr is the ISO 8583 listen address ("127.0.0.1:0" picks a port).
	Addr string
	// DataDir holds the journal (created if missing; mode 0700, its files 0600). One host at a time
	// uses a directory.
	DataDir string
	// Latency is how long the host waits, from receiving a request, before answering it.
	Latency time.Duration
	// DropRate is the share (0 to 1) of answers to 0100, 0200 and 0220 that are decided and
	// journaled but never sent.
	DropRate float64
	// HTTPAddr is where the settlement report, the journal and the controls are served; "" for none.
	HTTPAddr string
	// Now is the clock of decisions and the journal (default time.Now).
	Now func() time.Time
	// Logger receives connection events and failures (default slog.Default()).
	Logger *slog.Logger
}

// Host is a running acquirer host.
type Host struct {
	cfg     Config
	log     *slog.Logger
	journal *journal
	iso     *server.Server
	http    *http.Server
	httpLn  net.Listener
	unlock  func()

	mu     sync.Mutex // guards book, nextID, and every session
	book   *book
	nextID int64

	latency  atomic.Int64  // time.Duration
	dropRate atomic.Uint64 // math.Float64bits
	dropNext atomic.Int64

	closeMu   sync.Mutex
	closed    bool
	inflight  sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// ErrDataDirInUse is returned by Start when another host uses the data directory.
var ErrDataDirInUse = errors.New("acquirer: another host is using this data directory")

// Start opens the journal in cfg.DataDir, replays it, and starts listening.
func Start(cfg Config) (*Host, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("acquirer: a data directory is required")
	}
	if cfg.DropRate < 0 || cfg.DropRate > 1 || cfg.Latency < 0 {
		return nil, errors.New("acquirer: the drop rate is between 0 and 1, the latency not negative")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Host{cfg: cfg, log: cfg.Logger, book: newBook()}
	h.latency.Store(int64(cfg.Latency))
	h.dropRate.Store(math.Float64bits(cfg.DropRate))
	if was, err := private.Dir(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("acquirer: %w", err)
	} else if was != 0 {
		h.log.Warn("changed the mode of the data directory to the acquirer's user alone", "path", cfg.DataDir,
			"mode_was", fmt.Sprintf("%04o", was), "mode", fmt.Sprintf("%04o", private.DirMode))
	}
	var err error
	if h.unlock, err = lockDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := h.open(); err != nil {
		h.Close()
		return nil, fmt.Errorf("acquirer: %w", err)
	}
	return h, nil
}

// open opens and replays the journal and starts the listeners; Close undoes what it did.
func (h *Host) open() (err error) {
	if h.journal, err = openJournal(h.cfg.DataDir, h.log, h.committed); err != nil {
		return err
	}
	if h.nextID, err = h.journal.replay(context.Background(), h.book); err != nil {
		return fmt.Errorf("replay the journal: %w", err)
	}
	h.iso = server.New(Spec, ReadLength, nil) // connections come from h.connection
	if err := h.iso.SetOptions(server.WithConnectionFactory(h.connection),
		server.WithErrorHandler(func(err error) { h.log.Warn("iso 8583 listener", "err", err) })); err != nil {
		return err
	}
	if err := h.iso.Start(h.cfg.Addr); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if h.cfg.HTTPAddr == "" {
		return nil
	}
	if h.httpLn, err = net.Listen("tcp", h.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen http: %w", err)
	}
	h.http = &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn)}
	go h.http.Serve(h.httpLn)
	return nil
}

// lockDir holds an exclusive lock on dir until the returned function is called.
func lockDir(dir string) (func(), error) {
	f, err := private.OpenFile(filepath.Join(dir, "acquirer.lock"), os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("acquirer: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrDataDirInUse
		}
		return nil, fmt.Errorf("acquirer: lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// Addr is the ISO 8583 listen address.
func (h *Host) Addr() string { return h.iso.Addr }

// HTTPAddr is the HTTP listen address, "" without one.
func (h *Host) HTTPAddr() string {
	if h.httpLn == nil {
		return ""
	}
	return h.httpLn.Addr().String()
}

// Close stops listening, closes every connection, lets the requests being answered finish, and
// closes the journal. Only the first call does anything.
func (h *Host) Close() error {
	h.closeOnce.Do(func() { h.closeErr = h.shutdown() })
	return h.closeErr
}

func (h *Host) shutdown() error {
	if h.iso != nil {
		h.iso.Close()
	}
	h.closeMu.Lock()
	h.closed = true
	h.closeMu.Unlock()
	h.inflight.Wait()
	var err error
	if h.http != nil {
		err = h.http.Close()
	}
	if h.journal != nil {
		err = errors.Join(err, h.journal.close())
	}
	h.unlock()
	return err
}

// SetLatency sets how long the host waits before answering each request.
func (h *Host) SetLatency(d time.Duration) { h.latency.Store(int64(d)) }

// SetDropRate sets the share (0 to 1) of financial answers withheld.
func (h *Host) SetDropRate(r float64) { h.dropRate.Store(math.Float64bits(r)) }

// DropNext withholds the next n answers to 0100, 0200 and 0220, whatever the drop rate.
func (h *Host) DropNext(n int64) { h.dropNext.Store(n) }

// process decides r, applies it to the book and queues its journal entry, to be answered by a once
// committed, all under one lock so that the journal's order is the order of decisions. Once the
// journal has failed, the entry is refused (96) and not journaled: its ID is 0.
func (h *Host) process(s *session, r *request, a *reply) *Entry {
	e := &Entry{ReceivedAt: h.cfg.Now().UTC(), MTI: r.mti, ProcessingCode: r.field(3), FunctionCode: r.field(24),
		STAN: r.field(11), Transmission: r.field(7), RRN: r.field(37), TerminalID: r.field(41), MerchantID: r.field(42),
		Reference: r.field(62), Amount: r.amount, Currency: r.field(49), EntryMode: r.field(22), Condition: r.field(25),
		CVV2: r.cvv2, AU: r.au, Original: r.field(90)}
	if !r.pan.IsZero() {
		e.PANFirst6, e.PANLast4 = r.pan.First6(), r.pan.Last4()
	}
	a.e = e
	if err := h.journal.failure(); err != nil {
		e.Status, e.ResponseCode, e.Note = StatusRefused, codeMalfunction, "the journal failed: "+err.Error()
		return e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.book.decide(r, e, s, e.ReceivedAt)
	e.Dropped = h.drop(e)
	h.nextID++
	e.ID = h.nextID
	h.journal.add(e, h.book.apply(e), a)
	return e
}

// drop decides whether e's answer is withheld: only answers to 0100, 0200 and 0220, what a request
// that timed out looks like to the sender.
func (h *Host) drop(e *Entry) bool {
	if e.Status == StatusRefused || (e.MTI != mtiAuthorization && e.MTI != mtiFinancial && e.MTI != mtiCapture) {
		return false
	}
	for n := h.dropNext.Load(); n > 0; n = h.dropNext.Load() {
		if h.dropNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
	return rand.Float64() < math.Float64frombits(h.dropRate.Load())
}

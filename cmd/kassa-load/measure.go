package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
)

// timedHandler measures the server's time for a request: from entering the handler it wraps to that
// handler's return, the response written. The benchmark sends one request at a time: expect clears
// the last figure before a request, took waits for the request's own.
type timedHandler struct {
	h    http.Handler
	last chan time.Duration
}

func newTimedHandler(h http.Handler) *timedHandler {
	return &timedHandler{h: h, last: make(chan time.Duration, 1)}
}

func (t *timedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.h.ServeHTTP(w, r)
	d := time.Since(start)
	select {
	case <-t.last: // an earlier request's figure that nobody read
	default:
	}
	t.last <- d
}

// expect forgets a figure left by a request that was not measured.
func (t *timedHandler) expect() {
	select {
	case <-t.last:
	default:
	}
}

// took is the server's time for the request just answered, once its handler has returned.
func (t *timedHandler) took(wait time.Duration) (time.Duration, error) {
	select {
	case d := <-t.last:
		return d, nil
	case <-time.After(wait):
		return 0, errors.New("the handler did not return")
	}
}

// csvRows counts the records of an RFC 4180 stream written to it, without keeping it: line breaks
// outside quoted fields end a record (a quoted field may hold one; a doubled quote inside one toggles
// twice). A last record without a line break counts too.
type csvRows struct {
	n       int
	quoted  bool
	partial bool // bytes of a record not yet ended
}

func (c *csvRows) Write(p []byte) (int, error) {
	for _, b := range p {
		switch {
		case b == '"':
			c.quoted = !c.quoted
			c.partial = true
		case b == '\n' && !c.quoted:
			c.n++
			c.partial = false
		case b != '\r':
			c.partial = true
		}
	}
	return len(p), nil
}

func (c *csvRows) records() int {
	if c.partial {
		return c.n + 1
	}
	return c.n
}

// memPeak is the Go heap around an operation: in use by objects (live and not yet swept) just before
// it, after a collection, and at its peak while it ran; the peak of the live heap measured by the
// collections that ran meanwhile; and the process's peak resident memory while it ran (which also
// counts memory outside Go's heap, such as SQLite's page cache), when Linux lets it be reset.
type memPeak struct {
	before, peak, livePeak, rssPeak uint64
}

// growth is how much the heap in use rose above where it was before.
func (m memPeak) growth() uint64 {
	if m.peak < m.before {
		return 0
	}
	return m.peak - m.before
}

// memSampler samples the heap every memSampleEvery until stopped.
type memSampler struct {
	peak    memPeak
	done    chan struct{}
	stopped sync.WaitGroup
}

const memSampleEvery = time.Millisecond

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes"}

func readHeap(s []metrics.Sample) (inUse, live uint64) {
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func startMemSampler() *memSampler {
	m := &memSampler{done: make(chan struct{})}
	s := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	runtime.GC()
	m.peak.before, _ = readHeap(s)
	m.peak.peak = m.peak.before
	resetPeakRSS()
	m.stopped.Add(1)
	go func() {
		defer m.stopped.Done()
		tick := time.NewTicker(memSampleEvery)
		defer tick.Stop()
		for {
			inUse, live := readHeap(s)
			m.peak.peak, m.peak.livePeak = max(m.peak.peak, inUse), max(m.peak.livePeak, live)
			select {
			case <-m.done:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memSampler) stop() memPeak {
	close(m.done)
	m.stopped.Wait()
	m.peak.rssPeak = peakRSS()
	return m.peak
}

// resetPeakRSS resets the process's peak resident set size (Linux: "5" to /proc/self/clear_refs).
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM of /proc/self/status in bytes, or 0 where there is none.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// apiClient is an HTTP client of the gateway API with a bearer token of creds, from the token
// endpoint.
func apiClient(ctx context.Context, base string, creds auth.Credentials) (*http.Client, error) {
	cfg := clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret, TokenURL: base + "/oauth/token"}
	if _, err := cfg.Token(ctx); err != nil {
		return nil, err
	}
	return cfg.Client(ctx), nil
}

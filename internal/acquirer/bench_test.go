package acquirer_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moov-io/iso8583"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card/cardtest"
)

// BenchmarkSales measures the host alone: approved sales, journaled, from 8 connections with up to 64
// in flight on each. The client is made to cost little, so that the figure is the host's: each
// connection sends a sale packed once, changing only its STAN and its reference (random, as Kassa's
// are) in place, writes whatever the window allows in one write, and checks every answer's field 39.
// It reports sales/s and the CPU time of the whole process (host and client) per sale.
func BenchmarkSales(b *testing.B) {
	h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	const connections, window = 8, 64
	var claimed atomic.Int64
	claim := func() bool { return claimed.Add(1) <= int64(b.N) }
	cpu := acquirer.CPUTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range connections {
		wg.Go(func() { pipeline(b, h.Addr(), fmt.Sprintf("B%07d", i), window, claim) })
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
	b.ReportMetric(float64((acquirer.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/sale")
}

// pipeline signs terminal tid on over a connection of its own and sends sales while claim allows,
// with at most window unanswered.
func pipeline(b *testing.B, addr, tid string, window int, claim func() bool) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Error(err)
		return
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if a := roundTrip(b, conn, r, map[int]string{0: "0800", 7: "0101000000", 11: "000001", 24: "001"}); a != "00" {
		b.Errorf("sign-on answered %q", a)
		return
	}
	const stanMark, refMark = "271828", "REFERENCE-PLACEHOLDR"
	sale := frame(b, map[int]string{0: "0200", 2: cardtest.Visa, 3: "000000", 4: "000000001999",
		7: time.Now().UTC().Format("0102150405"), 11: stanMark, 12: "120000", 13: "0101", 14: "3012", 22: "010",
		25: "59", 37: "000000000001", 41: tid, 42: "MERCHANT0000001", 48: "CV03123", 49: "124", 62: refMark})
	stanAt, refAt := bytes.Index(sale, []byte(stanMark)), bytes.Index(sale, []byte(refMark))
	if bytes.Count(sale, []byte(stanMark)) != 1 || bytes.Count(sale, []byte(refMark)) != 1 {
		b.Fatal("the placeholders are not unique in the packed sale")
	}

	slots := make(chan struct{}, window) // one per sale in flight
	failed := make(chan struct{})
	var done atomic.Bool
	go func() { // reads the answers until the connection closes
		for {
			a, err := readAnswer(r)
			if err != nil && done.Load() {
				return
			}
			if err != nil || a != "00" {
				b.Errorf("answer %q: %v", a, err)
				close(failed)
				return
			}
			<-slots
		}
	}()
	acquire := func() bool {
		select {
		case slots <- struct{}{}:
			return true
		case <-failed:
			return false
		}
	}

	w := bufio.NewWriterSize(conn, 64<<10)
	ref := make([]byte, 10)
	for n := 1; claim(); n++ {
		select {
		case slots <- struct{}{}:
		default: // the window is full: send what is buffered, then wait for a slot
			if err := w.Flush(); err != nil || !acquire() {
				return
			}
		}
		if n > 999999 {
			b.Fatal("more than a million sales on one terminal in one second")
		}
		for i := range ref {
			ref[i] = byte(rand.Uint32())
		}
		copy(sale[stanAt:], fmt.Appendf(nil, "%06d", n))
		hex.Encode(sale[refAt:], ref)
		w.Write(sale)
	}
	if err := w.Flush(); err != nil {
		b.Error(err)
		return
	}
	for range window { // every slot free: every sale answered
		if !acquire() {
			return
		}
	}
	done.Store(true)
}

// frame packs a message of fields behind its frame header.
func frame(b testing.TB, fields map[int]string) []byte {
	m := iso8583.NewMessage(acquirer.Spec)
	for id, v := range fields {
		if err := m.Field(id, v); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := (acquirer.FrameWriter{}).WriteMessage(&buf, m); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// roundTrip sends a message and returns the answer's field 39.
func roundTrip(b testing.TB, conn net.Conn, r *bufio.Reader, fields map[int]string) string {
	if _, err := conn.Write(frame(b, fields)); err != nil {
		b.Fatal(err)
	}
	a, err := readAnswer(r)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// readAnswer reads a framed answer and returns its field 39.
func readAnswer(r *bufio.Reader) (string, error) {
	n, err := acquirer.ReadLength(r)
	if err != nil {
		return "", err
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return "", err
	}
	m := iso8583.NewMessage(acquirer.Spec)
	if err := m.Unpack(raw); err != nil {
		return "", err
	}
	return m.GetString(39)
}

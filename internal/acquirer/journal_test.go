package acquirer

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestGroupCommit shows that the writes queued while a commit is under way share the next
// transaction, whichever reader flushes them, and that none is answered before its transaction
// commits.
func TestGroupCommit(t *testing.T) {
	commits := make(chan []*reply, 10)
	j, err := openJournal(t.TempDir(), slog.Default(), func(rs []*reply, err error) {
		if err != nil {
			t.Error(err)
		}
		commits <- rs
	})
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	// Hold the journal's one connection, as a long commit would.
	held, err := j.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var mu sync.Mutex // the host's: entries are added in the order of their IDs
	for i := range n {
		go func() { // a reader each
			mu.Lock()
			e := &Entry{ID: int64(i + 1), ReceivedAt: time.UnixMilli(0), MTI: "0200", Reference: fmt.Sprint("ref-", i), Status: StatusProcessed}
			j.add(e, 0, &reply{e: e})
			mu.Unlock()
			j.flush()
		}()
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case <-commits:
		t.Fatal("writes were answered while their transaction could not commit")
	default:
	}
	held.Close()
	// The first flush took the writes added before it and waits for the connection; the others
	// waited together.
	var sizes []int
	for answered := 0; answered < n; answered += sizes[len(sizes)-1] {
		sizes = append(sizes, len(<-commits))
	}
	if len(sizes) > 2 {
		t.Errorf("%d writes went into transactions of %v", n, sizes)
	}
	var count, maxID int64
	if err := j.db.QueryRow(`SELECT count(*), max(id) FROM journal`).Scan(&count, &maxID); err != nil || count != n || maxID != n {
		t.Errorf("journal holds %d rows up to %d (%v), want %d", count, maxID, err, n)
	}
}

// BenchmarkJournal measures the journal's cost per entry: sales committed in batches of the sizes a
// group commit sees under load (one or two entries when they come one by one, more in bursts), into a
// journal that already holds 50,000 of them. cpu-µs/entry is the CPU time of the whole process.
func BenchmarkJournal(b *testing.B) {
	for _, size := range []int{1, 8} {
		b.Run(fmt.Sprint("batch=", size), func(b *testing.B) {
			var committed error
			j, err := openJournal(b.TempDir(), slog.Default(), func(_ []*reply, err error) { committed = err })
			if err != nil {
				b.Fatal(err)
			}
			defer j.close()
			id := int64(0)
			commit := func(n int) {
				for range n {
					id++
					j.add(benchEntry(id), 0, nil)
				}
				j.flush()
				if committed != nil {
					b.Fatal(committed)
				}
			}
			for range 50_000 / 500 {
				commit(500)
			}
			cpu := cpuTime()
			b.ResetTimer()
			for done := 0; done < b.N; done += size {
				commit(min(size, b.N-done))
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/entry")
		})
	}
}

func benchEntry(id int64) *Entry {
	return &Entry{ID: id, ReceivedAt: time.Now(), MTI: "0200", ProcessingCode: "000000", STAN: fmt.Sprintf("%06d", id%999999+1),
		Transmission: "1123101500", RRN: fmt.Sprintf("%012d", id), TerminalID: "TERM0001", MerchantID: "MERCHANT0000001",
		Reference: fmt.Sprintf("%020x", rand.Uint64()), Amount: 1999, Currency: "124", EntryMode: "010", Condition: "59",
		CVV2: true, PANFirst6: "424242", PANLast4: "4242", ResponseCode: "00", AuthCode: "A1B2C3", ApprovalDay: "2026-11-23",
		Status: StatusProcessed}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

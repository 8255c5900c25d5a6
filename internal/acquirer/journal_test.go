package acquirer

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// TestGroupCommit shows that the writes queued while a commit is under way share the next
// transaction, and that none is reported done before its transaction commits.
func TestGroupCommit(t *testing.T) {
	j, err := openJournal(t.TempDir(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	// Hold the journal's one connection, as a long commit would.
	held, err := j.writer.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	batches := map[*batch]bool{}
	var last *batch
	for i := range n {
		e := &Entry{ID: int64(i + 1), ReceivedAt: time.UnixMilli(0), MTI: "0200", Reference: fmt.Sprint("ref-", i), Status: StatusProcessed}
		last = j.add(e, 0)
		batches[last] = true
	}
	time.Sleep(50 * time.Millisecond)
	for b := range batches {
		select {
		case <-b.done:
			t.Fatal("a write reported done while its transaction could not commit")
		default:
		}
	}
	held.Close()
	for b := range batches {
		<-b.done
		if b.err != nil {
			t.Fatal(b.err)
		}
	}
	// The loop may have taken the first write alone before it found the connection held; the
	// others waited together.
	if len(batches) > 2 {
		t.Errorf("%d writes went into %d transactions", n, len(batches))
	}
	var count, maxID int64
	if err := j.reader.QueryRow(`SELECT count(*), max(id) FROM journal`).Scan(&count, &maxID); err != nil || count != n || maxID != n {
		t.Errorf("journal holds %d rows up to %d (%v), want %d", count, maxID, err, n)
	}
}

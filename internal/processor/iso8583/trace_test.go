package iso8583_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// traces collects prepared traces ("STAN:YYYYMMDDhhmmss:RRN") and fails the test on a STAN used twice
// by one terminal or an RRN used twice at the acquirer.
type traces struct {
	mu    sync.Mutex
	stans map[string]bool // terminal + STAN
	rrns  map[string]bool
}

func (c *traces) prepare(t *testing.T, p conn, terminal string, n int) {
	t.Helper()
	for range n {
		tr, err := p.Prepare(context.Background(), processor.Merchant{})
		if err != nil {
			t.Error(err)
			return
		}
		parts := strings.Split(tr, ":")
		if len(parts) != 3 || len(parts[0]) != 6 || len(parts[2]) != 12 {
			t.Errorf("trace %q", tr)
			return
		}
		c.mu.Lock()
		if c.stans[terminal+parts[0]] || c.rrns[parts[2]] {
			t.Errorf("trace %q of %s repeats a STAN of the terminal or an RRN", tr, terminal)
		}
		c.stans[terminal+parts[0]], c.rrns[parts[2]] = true, true
		c.mu.Unlock()
	}
}

// run prepares n traces on each of ps at once.
func (c *traces) run(t *testing.T, n int, ps map[string]conn) {
	t.Helper()
	var wg sync.WaitGroup
	for name, p := range ps {
		for range 2 {
			wg.Go(func() { c.prepare(t, p, name[:8], n) })
		}
	}
	wg.Wait()
}

// TestTracesUniqueAcrossKindsAndRestarts: two kinds on one database (two nodes) prepare at once, for
// two terminals of one acquirer, then a third kind on the database (a restart) goes on; no terminal's
// STAN and no RRN is handed out twice. Small blocks make every kind reserve many.
func TestTracesUniqueAcrossKindsAndRestarts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		addr := closedAddress(t)
		c := &traces{stans: map[string]bool{}, rrns: map[string]bool{}}
		a, _ := newKind(t, db, iso8583.KindConfig{Block: 7})
		b, _ := newKind(t, db, iso8583.KindConfig{Block: 5})
		c.run(t, 100, map[string]conn{
			"TERM0001 on a": open(t, a, config(addr, "TERM0001", "1s")),
			"TERM0002 on a": open(t, a, config(addr, "TERM0002", "1s")),
			"TERM0001 on b": open(t, b, config(addr, "TERM0001", "1s")),
			"TERM0002 on b": open(t, b, config(addr, "TERM0002", "1s")),
		})
		a.Close()
		b.Close()
		restarted, _ := newKind(t, db, iso8583.KindConfig{Block: 7})
		c.run(t, 50, map[string]conn{
			"TERM0001 restarted": open(t, restarted, config(addr, "TERM0001", "1s")),
			"TERM0002 restarted": open(t, restarted, config(addr, "TERM0002", "1s")),
		})
		if len(c.rrns) != 2*4*100+2*2*50 {
			t.Errorf("%d traces, want %d", len(c.rrns), 2*4*100+2*2*50)
		}
	})
}

// TestTracesUniqueAcrossPostgresNodes: two nodes with their own connections to one PostgreSQL
// database.
func TestTracesUniqueAcrossPostgresNodes(t *testing.T) {
	t.Parallel()
	url := storetest.PostgresURL(t)
	addr := closedAddress(t)
	c := &traces{stans: map[string]bool{}, rrns: map[string]bool{}}
	nodes := map[string]conn{}
	for _, name := range []string{"TERM0001 node 1", "TERM0001 node 2"} {
		db, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		k, _ := newKind(t, db, iso8583.KindConfig{Block: 3})
		nodes[name] = open(t, k, config(addr, "TERM0001", "1s"))
	}
	c.run(t, 200, nodes)
}

// TestNextBlockIsReservedAhead: the next block of STANs and RRNs is reserved while the block in use
// lasts, so that a terminal's sales do not wait for a busy database when it runs out: with the
// database's writer held, the rest of the first block and the whole second are still handed out.
func TestNextBlockIsReservedAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.SQLite(t)
	k, _ := newKind(t, db, iso8583.KindConfig{Block: 10})
	p := open(t, k, config(closedAddress(t), "TERM0001", "1s"))
	c := &traces{stans: map[string]bool{}, rrns: map[string]bool{}}
	c.prepare(t, p, "TERM0001", 1)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM iso8583_series WHERE reserved = 21`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 { // the terminal's STANs and the acquirer's RRNs: 1–10 in use, 11–20 ahead
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second blocks were not reserved ahead")
		}
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go db.Write(ctx, func(*store.Tx) error {
		once.Do(func() { close(held) })
		<-release
		return nil
	})
	<-held
	defer close(release)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.prepare(t, p, "TERM0001", 19)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("preparing waited for the database with the next block reserved")
	}
	if len(c.rrns) != 20 {
		t.Errorf("%d traces, want 20", len(c.rrns))
	}
}

// TestSeriesMovesOnAfterAPromotion: a series last reserved on another PostgreSQL timeline than the
// current one — the database was promoted since, by a failover or a restore to a point in time that
// forgot the blocks reserved after it — moves on by a quarter of the STAN cycle and a thousandth of
// the RRN range, so that the numbers those blocks handed out, which the acquirer remembers, are not
// handed out again. A reservation records the current timeline; SQLite has none and never skips.
func TestSeriesMovesOnAfterAPromotion(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		first := func() (stan, rrn int) {
			k, _ := newKind(t, db, iso8583.KindConfig{Block: 10})
			p := open(t, k, config(closedAddress(t), "TERM0001", "1s"))
			tr, err := p.Prepare(ctx, processor.Merchant{})
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(tr, ":")
			stan, _ = strconv.Atoi(parts[0])
			rrn, _ = strconv.Atoi(parts[2])
			return stan, rrn
		}
		stan, rrn := first()
		var timelines []int64
		rows, err := db.Reader().QueryContext(ctx, `SELECT DISTINCT timeline FROM iso8583_series`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var tl int64
			rows.Scan(&tl)
			timelines = append(timelines, tl)
		}
		rows.Close()
		want := int64(0)
		if db.Dialect() == store.Postgres {
			want = 1 // a new cluster's first timeline
		}
		if len(timelines) != 1 || timelines[0] != want {
			t.Fatalf("the series' timelines %v, want [%d]", timelines, want)
		}
		// A restart on the same timeline goes on from the blocks reserved (two per series: one in use,
		// one ahead), skipping nothing more.
		again, againRRN := first()
		if again <= stan || again > stan+30 || againRRN <= rrn || againRRN > rrn+30 {
			t.Fatalf("after a restart: STAN %d, RRN %d; want just past %d, %d", again, againRRN, stan, rrn)
		}
		// The row says it was last reserved on another timeline: a promotion since.
		if _, err := db.Exec(ctx, `UPDATE iso8583_series SET timeline = 7 WHERE timeline <> 0`); err != nil {
			t.Fatal(err)
		}
		moved, movedRRN := first()
		if db.Dialect() == store.SQLite {
			if moved > again+30 || movedRRN > againRRN+30 {
				t.Fatalf("SQLite skipped: STAN %d, RRN %d after %d, %d", moved, movedRRN, again, againRRN)
			}
			return
		}
		if moved < again+250_000 || moved > again+250_030 || movedRRN < againRRN+1_000_000_000 || movedRRN > againRRN+1_000_000_030 {
			t.Fatalf("after a promotion: STAN %d, RRN %d; want a quarter cycle and a thousandth of the range past %d, %d", moved, movedRRN, again, againRRN)
		}
	})
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/pgcluster"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The dashboard benchmark end to end, small, on both backends: it loads the history, stores cards
// through the vault's API, signs in, and reports every page the benchmark times — measured, with
// server times — and the two exports; it says the run failed exactly when a page or an export did
// (a page that does not answer 200 is a failure naming its URL: TestExportsAreJudged and the
// harness's own lines).
func TestDashboardBenchmarkReportsEveryPage(t *testing.T) {
	if testing.Short() {
		t.Skip("loads two databases and starts a PostgreSQL cluster")
	}
	if err := pgcluster.Available(); err != nil {
		storetest.Unavailable(t, "PostgreSQL: %v", err)
	}
	var out bytes.Buffer
	c := dashConfig{backends: []string{"sqlite", "postgres"}, transactions: 3000, customers: 300, carded: 5, requests: 8,
		exportRows: 600, pageLimit: 100 * time.Millisecond, exportLimit: 5 * time.Second, jsonOut: true, wrap: apitest.Middleware(t)}
	ok, err := runDashboard(context.Background(), c, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	allOK := true
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		backend, _ := r["backend"].(string)
		switch {
		case r["machine"] != nil:
			seen["machine"] = true
		case r["loaded_transactions"] != nil:
			if r["loaded_transactions"].(float64) != 3000 || r["customers"].(float64) != 300 || r["carded_customers"].(float64) != 5 {
				t.Errorf("loaded: %v", r)
			}
			seen["loaded "+backend] = true
		case r["page"] != nil:
			name, example := r["page"].(string), r["example"].(string)
			if failure, failed := r["failure"].(string); failed {
				t.Errorf("%s %s: %s", backend, name, failure)
				allOK = false
			} else if r["requests"].(float64) != 8 || r["p50_ms"].(float64) <= 0 || r["p99_ms"].(float64) < r["p50_ms"].(float64) {
				t.Errorf("%s %s: %v", backend, name, r)
			} else {
				allOK = allOK && r["ok"].(bool)
			}
			if name == "overview" && (example != "/dashboard" || r["failure"] != nil) {
				t.Errorf("%s: the overview is not measured: %v", backend, r)
			}
			seen[backend+" "+name] = true
		case r["export_ok"] != nil:
			allOK = allOK && r["export_ok"].(bool)
			seen["export "+backend] = true
		case r["export_from"] != nil:
			if f, failed := r["failure"].(string); failed {
				t.Errorf("export failure %q", f)
			}
		default:
			t.Errorf("unexpected line %v", r)
		}
	}
	for _, b := range []string{"sqlite", "postgres"} {
		for _, want := range []string{"loaded " + b, b + " overview", b + " list", b + " last 4", b + " e-mail", b + " customer",
			b + " detail", "export " + b} {
			if !seen[want] {
				t.Errorf("no result for %q in:\n%s", want, out.String())
			}
		}
	}
	if ok != allOK {
		t.Errorf("the run says ok=%v, its lines say %v", ok, allOK)
	}
}

// The server's time of a request is its handler's, not the client's: a handler that takes 30 ms
// before it answers, behind a client that takes 500 ms more to read, is measured at 30 ms and well
// under the client's time (on a loaded machine the handler's sleep alone can take 100 ms).
func TestTimedHandlerMeasuresTheHandler(t *testing.T) {
	h := newTimedHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond)
		io.WriteString(w, "hello")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 2 { // an unread figure of an earlier request does not stand in for the next one's
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	h.expect()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d, err := h.took(time.Second)
	if err != nil || d < 30*time.Millisecond || d > 300*time.Millisecond {
		t.Errorf("server time %v, %v; want 30 ms, and not the client's 500 ms", d, err)
	}
	if _, err := h.took(10 * time.Millisecond); err == nil {
		t.Error("a second figure for one request")
	}
}

// Records of an RFC 4180 stream are counted as encoding/csv reads them: line breaks and doubled
// quotes inside quoted fields belong to the field, CRLF ends a record, the last may lack one.
func TestCSVRowsCountsRecords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"id,amount\r\n", 1},
		{"id,amount\r\n1,2.00\r\n2,3.00\r\n", 3},
		{"id,name\r\n1,\"Smith,\r\nJohn\"\r\n2,\"say \"\"hi\"\"\"\r\n3,x", 4},
	} {
		var r csvRows
		for _, b := range []byte(c.in) { // in pieces, as a stream arrives
			r.Write([]byte{b})
		}
		if got := r.records(); got != c.want {
			t.Errorf("%q: %d records, want %d", c.in, got, c.want)
		}
	}
}

// The export's range is the fewest whole days, back from the last finished one, that hold the rows.
func TestExportRange(t *testing.T) {
	perDay := map[string]int{"2026-01-01": 50, "2026-01-02": 40, "2026-01-03": 30, "2026-01-04": 20, "2026-01-05": 5}
	for _, c := range []struct {
		rows int
		want dayRange
	}{
		{10, dayRange{"2026-01-04", "2026-01-04", 20}},
		{45, dayRange{"2026-01-03", "2026-01-04", 50}},
		{1000, dayRange{"2026-01-01", "2026-01-04", 140}},
	} {
		if got := exportRange(perDay, c.rows); got != c.want {
			t.Errorf("%d rows: %+v, want %+v", c.rows, got, c.want)
		}
	}
}

// The cards stored through the vault's API are valid Visa numbers, all different.
func TestLuhnVisa(t *testing.T) {
	seen := map[string]bool{}
	for i := range 500 {
		s := luhnVisa(i)
		n, err := card.ParseNumber(s)
		if err != nil || card.BrandOf(n) != card.Visa || seen[s] {
			t.Fatalf("%d: %s: %v", i, s, err)
		}
		seen[s] = true
	}
}

// The memory sampler sees what an operation holds while it runs, and not the garbage it makes and
// drops: 64 MiB held shows as about that much growth, 200 MiB allocated a megabyte at a time and
// dropped shows as far less.
func TestMemSamplerSeesHeldMemory(t *testing.T) {
	m := startMemSampler()
	var hold [][]byte
	for range 64 {
		hold = append(hold, make([]byte, 1<<20))
	}
	time.Sleep(20 * time.Millisecond)
	held := m.stop()
	runtime.KeepAlive(hold)
	hold = nil
	if held.growth() < 60<<20 || held.peak < held.before {
		t.Errorf("holding 64 MiB: %+v, growth %s", held, mib(held.growth()))
	}
	// The collector's target is kept tight (GOGC 10) while the garbage is made: at the default it lets
	// the heap grow by as much as is live before it collects, which depends on what the earlier tests
	// left (45 MiB once in a full run), not on the sampler.
	gogc := debug.SetGCPercent(10)
	m = startMemSampler()
	for range 200 {
		b := make([]byte, 1<<20)
		b[0] = 1
		time.Sleep(100 * time.Microsecond)
	}
	dropped := m.stop()
	debug.SetGCPercent(gogc)
	// Far less than the 200 MiB allocated, and than the 64 MiB held; not near zero, since the collector
	// runs concurrently and, on a machine whose cores the rest of the suite keeps busy, lags the
	// allocations.
	if dropped.growth() > 40<<20 {
		t.Errorf("dropping 200 MiB a megabyte at a time: growth %s", mib(dropped.growth()))
	}
}

// The exports are judged on their time, their rows and whether their memory stays flat.
func TestExportsAreJudged(t *testing.T) {
	c := dashConfig{exportRows: 100_000, exportLimit: 5 * time.Second}
	small := exportResult{backend: "sqlite", rows: 11_000, took: 300 * time.Millisecond, mem: memPeak{before: 10 << 20, peak: 14 << 20}}
	large := exportResult{backend: "sqlite", rows: 100_500, took: 2 * time.Second, mem: memPeak{before: 10 << 20, peak: 16 << 20}}
	for _, tc := range []struct {
		name   string
		change func(*exportResult)
		want   string // in the report; "" for a pass
	}{
		{"flat and fast", func(*exportResult) {}, ""},
		{"slow", func(e *exportResult) { e.took = 6 * time.Second }, "MISSED: the export took 6.00 s"},
		{"rows in memory", func(e *exportResult) { e.mem.peak = 60 << 20 }, "MISSED: memory not flat"},
		{"too few rows", func(e *exportResult) { e.rows = 50_000 }, "held 50000 rows, not about 100000"},
		{"not there", func(e *exportResult) { e.failure = "GET /dashboard/transactions/export.csv?from=…: 404 Not Found" }, "FAILED: GET"},
	} {
		l := large
		tc.change(&l)
		var out bytes.Buffer
		ok := (&dashReporter{w: &out}).exports([2]exportResult{small, l}, c)
		if ok != (tc.want == "") || tc.want != "" && !strings.Contains(out.String(), tc.want) || tc.want == "" && !strings.Contains(out.String(), "export: ok") {
			t.Errorf("%s: ok=%v\n%s", tc.name, ok, out.String())
		}
	}
}

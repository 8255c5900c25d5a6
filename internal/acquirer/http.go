package acquirer

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// routes are the HTTP listener's: the settlement report, the journal, health and the controls.
func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /settlement/{file}", h.settlement)
	mux.HandleFunc("GET /journal", h.entries)
	mux.HandleFunc("POST /control", h.control)
	return mux
}

func (h *Host) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := h.journal.failure(); err != nil {
		http.Error(w, "journal failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// settlementHeader is the profile's: "date,mti,processing_code,stan,rrn,reference,amount,currency,
// auth_code,reversed".
var settlementHeader = []string{"date", "mti", "processing_code", "stan", "rrn", "reference", "amount", "currency", "auth_code", "reversed"}

// settlementPage is how many rows of a settlement report are read at a time.
var settlementPage = 1000

// settlement serves GET /settlement/YYYY-MM-DD.csv: "every 0100, 0200 and 0220 it approved that day
// (UTC)", as CSV (RFC 4180: CRLF line ends, a header line), reversed true for those a 0400 undid since.
func (h *Host) settlement(w http.ResponseWriter, r *http.Request) {
	day, ok := strings.CutSuffix(r.PathValue("file"), ".csv")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if t, err := time.Parse(time.DateOnly, day); err != nil || t.Format(time.DateOnly) != day {
		problem(w, http.StatusBadRequest, "the report's name is YYYY-MM-DD.csv")
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	out := csv.NewWriter(w)
	out.UseCRLF = true
	out.Write(settlementHeader)
	// Read a page at a time, and written between reads: the journal's connection is the commits' too,
	// and a client reading slowly must not hold it.
	var err error
	for after, page := int64(0), []*Entry{}; err == nil; page = page[:0] {
		err = h.journal.entries(r.Context(), func(e *Entry) error { page = append(page, e); return nil },
			`WHERE approval_day = ? AND id > ? ORDER BY id LIMIT ?`, day, after, settlementPage)
		for _, e := range page {
			out.Write([]string{e.ApprovalDay, e.MTI, e.ProcessingCode, e.STAN, e.RRN, e.Reference,
				strconv.FormatInt(e.Amount, 10), e.Currency, e.AuthCode, strconv.FormatBool(e.Reversed)})
			after = e.ID
		}
		if len(page) < settlementPage {
			break
		}
	}
	out.Flush()
	if err == nil {
		err = out.Error()
	}
	if err != nil {
		// The status is sent: a truncated report must not pass for a whole one.
		h.log.Error("settlement report", "day", day, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// entries serves GET /journal?reference=R: the journal entries whose field 62 is R, in order, found by
// the book's index of references.
func (h *Host) entries(w http.ResponseWriter, r *http.Request) {
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		problem(w, http.StatusBadRequest, "reference is required")
		return
	}
	h.mu.Lock()
	ids, _ := json.Marshal(h.book.entries(ref)) // a list of integers always marshals
	h.mu.Unlock()
	list := []*Entry{}
	err := h.journal.entries(r.Context(), func(e *Entry) error { list = append(list, e); return nil },
		`WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`, string(ids))
	if err != nil {
		problem(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, list)
}

// control serves POST /control: {"drop_next": N, "latency": "50ms", "drop_rate": 0.1}, any of them.
// It answers the controls in force.
func (h *Host) control(w http.ResponseWriter, r *http.Request) {
	var c struct {
		DropNext *int64   `json:"drop_next"`
		Latency  *string  `json:"latency"`
		DropRate *float64 `json:"drop_rate"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		problem(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	var latency time.Duration
	if c.Latency != nil {
		var err error
		if latency, err = time.ParseDuration(*c.Latency); err != nil || latency < 0 {
			problem(w, http.StatusBadRequest, "latency: not a duration such as 50ms")
			return
		}
	}
	switch {
	case c.DropNext != nil && *c.DropNext < 0:
		problem(w, http.StatusBadRequest, "drop_next: not negative")
		return
	case c.DropRate != nil && !(*c.DropRate >= 0 && *c.DropRate <= 1):
		problem(w, http.StatusBadRequest, "drop_rate: between 0 and 1")
		return
	}
	if c.DropNext != nil {
		h.DropNext(*c.DropNext)
	}
	if c.Latency != nil {
		h.SetLatency(latency)
	}
	if c.DropRate != nil {
		h.SetDropRate(*c.DropRate)
	}
	writeJSON(w, map[string]any{"drop_next": h.dropNext.Load(), "latency": time.Duration(h.latency.Load()).String(),
		"drop_rate": math.Float64frombits(h.dropRate.Load())})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func problem(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

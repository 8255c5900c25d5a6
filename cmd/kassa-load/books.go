package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// books are the drill's checks after recovery, one row each, and what the clients
// did. Every row must have nothing wrong for the books to balance.
type books struct {
	backend string
	ran     time.Duration
	calls   []call
	outages []outage
	pending pending
	rows    []bookRow
}

// bookRow is one check: how many things it checked, how many were wrong, and what.
type bookRow struct {
	check          string
	checked, wrong int
	detail         string
}

func (b *books) add(check string, checked, wrong int, detail string) {
	b.rows = append(b.rows, bookRow{check: check, checked: checked, wrong: wrong, detail: detail})
}

// balanced reports whether every check found nothing wrong.
func (b *books) balanced() bool {
	return !slices.ContainsFunc(b.rows, func(r bookRow) bool { return r.wrong > 0 })
}

// pending is what recovery had left when the drill stopped waiting for it.
type pending struct {
	attempts, reversals, intents int
	waited                       time.Duration
}

func (p pending) total() int { return p.attempts + p.reversals + p.intents }

// settle waits until recovery has resolved every attempt: no ledger transaction PENDING, no reversal
// unanswered by the acquirer, no payment intent with an operation under way; for at most bound.
func settle(ctx context.Context, db *store.DB, bound time.Duration) (pending, error) {
	start := time.Now()
	for {
		var p pending
		err := db.QueryRow(ctx, []any{&p.attempts, &p.reversals, &p.intents}, `SELECT
			(SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'),
			(SELECT COUNT(*) FROM reversals WHERE acknowledged_at IS NULL),
			(SELECT COUNT(*) FROM payment_intents WHERE pending_op IS NOT NULL)`)
		p.waited = time.Since(start)
		if err != nil || p.total() == 0 || p.waited > bound {
			return p, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// check runs every check of the books.
func (b *books) check(ctx context.Context, db *store.DB, cli *kassa, m merchant, acq *acquirer, start time.Time, dir string) error {
	for _, step := range []func() error{
		func() error { return b.reconcile(ctx, cli, m, acq, start, dir) },
		func() error {
			var total int
			err := db.QueryRow(ctx, []any{&total}, `SELECT COUNT(*) FROM transactions`)
			b.add("no attempt left pending", total, b.pending.total(), fmt.Sprintf("after %.1f s of recovery: %d attempts pending, %d reversals unanswered, %d intents under way",
				b.pending.waited.Seconds(), b.pending.attempts, b.pending.reversals, b.pending.intents))
			return err
		},
		func() error { return b.bounded(ctx, db, "captured ≤ authorized", "AUTHORIZATION", "CAPTURE") },
		func() error {
			return b.bounded(ctx, db, "refunded ≤ captured (or sold)", "SALE', 'CAPTURE", "REFUND")
		},
		func() error { return b.chargedOnce(ctx, db) },
		func() error { return b.answersAgree(ctx, db) },
		func() error { return b.cyclesOnce(ctx, db) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	b.serverErrors()
	b.answered()
	return nil
}

// reconcile runs "kassa reconcile" for each UTC day of the run against the acquirer's settlement report
// of that day, and checks that no reference is settled twice.
func (b *books) reconcile(ctx context.Context, cli *kassa, m merchant, acq *acquirer, start time.Time, dir string) error {
	var matched, ledgerWrong, inEffect, acquirerWrong, twice int
	var details []string
	for day := start.UTC().Truncate(24 * time.Hour); !day.After(time.Now().UTC()); day = day.AddDate(0, 0, 1) {
		name := day.Format(time.DateOnly)
		report, err := fetch(ctx, "http://"+acq.web+"/settlement/"+name+".csv")
		if err != nil {
			return err
		}
		path := filepath.Join(dir, "settlement-"+name+".csv")
		if err := os.WriteFile(path, report, 0o600); err != nil {
			return err
		}
		args := append([]string{"reconcile", "--merchant-id", m.ID, "--date", name, "--report", path}, cli.dbArgs...)
		cmd := exec.CommandContext(ctx, cli.bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var res struct {
			Matched            int               `json:"matched"`
			MissingInKassa     []json.RawMessage `json:"missing_in_kassa"`
			MissingAtAcquirer  []json.RawMessage `json:"missing_at_acquirer"`
			AmountMismatch     []json.RawMessage `json:"amount_mismatch"`
			ReversedAtAcquirer []json.RawMessage `json:"reversed_at_acquirer"`
		}
		// Exit 1 with the differences printed is an imbalance, not a failure of the drill.
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			return fmt.Errorf("kassa reconcile --date %s: %v: %s", name, err, stderr.String())
		}
		matched += res.Matched
		ledgerWrong += len(res.MissingAtAcquirer) + len(res.AmountMismatch) + len(res.ReversedAtAcquirer)
		acquirerWrong += len(res.MissingInKassa)
		for _, l := range [][]json.RawMessage{res.MissingAtAcquirer, res.AmountMismatch, res.ReversedAtAcquirer, res.MissingInKassa} {
			for _, e := range l[:min(len(l), 3)] {
				details = append(details, string(e))
			}
		}
		rows, err := csv.NewReader(strings.NewReader(string(report))).ReadAll()
		if err != nil {
			return fmt.Errorf("settlement report %s: %w", name, err)
		}
		seen := map[string]int{}
		for _, r := range rows[1:] { // date,mti,processing_code,stan,rrn,reference,amount,currency,auth_code,reversed
			if r[9] == "false" {
				inEffect++
				if seen[r[5]]++; seen[r[5]] == 2 {
					twice++
					details = append(details, "settled twice: "+r[5])
				}
			}
		}
	}
	b.add("approved ledger op = one settled acquirer op, same amount", matched+ledgerWrong, ledgerWrong+twice,
		fmt.Sprintf("kassa reconcile: %d matched; %d settled twice", matched, twice))
	b.add("acquirer op in effect has its ledger row", inEffect, acquirerWrong, "")
	if len(details) > 0 {
		fmt.Fprintf(os.Stderr, "drill %s: reconciliation differences (first few):\n  %s\n", b.backend, strings.Join(details, "\n  "))
	}
	return nil
}

// fetch GETs u, which must answer 200.
func fetch(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return body, err
}

// bounded checks that no parent of kinds has approved children of kind child beyond its own amount,
// and that only an approved parent has approved children.
func (b *books) bounded(ctx context.Context, db *store.DB, check, kinds, child string) error {
	var parents, wrong int
	var detail []string
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT p.transaction_id, p.status, p.amount, COALESCE(SUM(c.amount), 0) FROM transactions p
			LEFT JOIN transactions c ON c.parent_id = p.id AND c.kind = '`+child+`' AND c.status = 'APPROVED'
			WHERE p.kind IN ('`+kinds+`') GROUP BY p.id, p.transaction_id, p.status, p.amount`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ref, status string
			var amount, children int64
			if err := rows.Scan(&ref, &status, &amount, &children); err != nil {
				return err
			}
			parents++
			if children > amount || children > 0 && status != "APPROVED" {
				wrong++
				detail = append(detail, fmt.Sprintf("%s %s %d: %d", ref, status, amount, children))
			}
		}
		return rows.Err()
	})
	b.add(check, parents, wrong, strings.Join(detail[:min(len(detail), 3)], "; "))
	return err
}

// ledgerKeys reads the idempotency key (or order_id) of the approved transactions that where selects.
func ledgerKeys(ctx context.Context, db *store.DB, column, where string) ([]string, error) {
	return texts(ctx, db, `SELECT `+column+` FROM transactions WHERE status = 'APPROVED' AND `+where)
}

// texts reads the one text column of query's rows.
func texts(ctx context.Context, db *store.DB, query string, args ...any) ([]string, error) {
	var out []string
	err := db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			out = append(out, s)
		}
		return rows.Err()
	})
	return out, err
}

// chargedOnce checks that every client request that charges a card was charged at most once, whether
// it got an answer or was retried until it gave up: a gateway API sale or authorization by its key (its
// order_id), a v1 payment intent or a hosted page's (whose session pays one intent) by its intent's
// ledger keys ("<intent> attempt <n>").
func (b *books) chargedOnce(ctx context.Context, db *store.DB) error {
	requests := 0
	for _, c := range b.calls {
		if c.op == "sale" || c.op == "authorize" || c.op == "create" || c.op == "session" {
			requests++
		}
	}
	charged := map[string]int{}
	orders, err := ledgerKeys(ctx, db, "order_id", `kind IN ('SALE', 'AUTHORIZATION') AND order_id LIKE 'drill-%'`)
	if err != nil {
		return err
	}
	intents, err := ledgerKeys(ctx, db, "idempotency_key", `kind IN ('SALE', 'AUTHORIZATION') AND idempotency_key LIKE 'pi\_% attempt %' ESCAPE '\'`)
	if err != nil {
		return err
	}
	for _, k := range orders {
		charged[k]++
	}
	for _, k := range intents {
		charged[strings.Fields(k)[0]]++
	}
	wrong, detail := 0, []string{}
	for k, n := range charged {
		if n > 1 {
			wrong++
			detail = append(detail, fmt.Sprintf("%s charged %d times", k, n))
		}
	}
	b.add("each client payment charged at most once", requests, wrong, strings.Join(detail[:min(len(detail), 3)], "; "))
	return nil
}

// answersAgree checks that every gateway API answer with a transaction says what the ledger holds: an
// answer APPROVED or DECLINED is that transaction's status after recovery, and a sale or
// authorization's transaction is the one of its request's order.
func (b *books) answersAgree(ctx context.Context, db *store.DB) error {
	checked, wrong := 0, 0
	var detail []string
	for _, c := range b.calls {
		var t struct {
			TransactionID string `json:"transaction_id"`
			Result        string `json:"transaction_result"`
		}
		if c.status != http.StatusOK || c.flow == "subscription setup" || json.Unmarshal(c.body, &t) != nil || t.TransactionID == "" {
			continue
		}
		checked++
		var status, order string
		err := db.QueryRow(ctx, []any{&status, &order}, `SELECT status, COALESCE(order_id, '') FROM transactions WHERE transaction_id = $1`, t.TransactionID)
		if err != nil {
			status = err.Error()
		}
		if status != t.Result || (c.op == "sale" || c.op == "authorize") && order != c.key {
			wrong++
			detail = append(detail, fmt.Sprintf("%s %s answered %s, ledger %s", c.op, t.TransactionID, t.Result, status))
		}
	}
	b.add("answers agree with the ledger", checked, wrong, strings.Join(detail[:min(len(detail), 3)], "; "))
	return nil
}

// cyclesOnce checks that no subscription's cycle was charged twice: the ledger's approved charges of
// the billing engine by their keys ("sub-<subscription>-c<cycle>-a<attempt>[-r<try>]"), and the
// subscriptions' records of approved charges.
func (b *books) cyclesOnce(ctx context.Context, db *store.DB) error {
	keys, err := ledgerKeys(ctx, db, "idempotency_key", `source = 'RECURRING'`)
	if err != nil {
		return err
	}
	perCycle := map[string]int{}
	for _, k := range keys {
		// sub-LOOKUP-cN-aM: the subscription and the cycle are everything before "-a".
		perCycle[k[:strings.LastIndex(k, "-a")]]++
	}
	wrong, detail := 0, []string{}
	for k, n := range perCycle {
		if n > 1 {
			wrong++
			detail = append(detail, fmt.Sprintf("%s charged %d times", k, n))
		}
	}
	var recorded, twice int
	err = db.QueryRow(ctx, []any{&recorded, &twice}, `SELECT COUNT(*), COALESCE(SUM(n - 1), 0) FROM
		(SELECT COUNT(*) AS n FROM subscription_charges WHERE status = 'APPROVED' GROUP BY subscription_id, cycle) AS c`)
	wrong += twice
	b.add("no subscription cycle charged twice", len(perCycle), wrong,
		fmt.Sprintf("%d cycles charged in the ledger, %d recorded by the engine; %s", len(perCycle), recorded, strings.Join(detail[:min(len(detail), 3)], "; ")))
	return err
}

// serverErrors classifies the clients' 5xx answers: only 502 and 503 are expected, and only while a
// component was down.
func (b *books) serverErrors() {
	total, wrong := 0, 0
	counts := map[string]int{}
	var unexplained []string // the first few, with their answers, to find out why
	for _, c := range b.calls {
		for _, f := range c.failures {
			total++
			where := f.during
			if where == "" {
				where = "no outage"
			}
			counts[strconv.Itoa(f.status)+" during "+strings.TrimRight(where, " 0123456789")]++
			if f.during == "" || f.status != http.StatusBadGateway && f.status != http.StatusServiceUnavailable {
				wrong++
				if len(unexplained) < 3 {
					unexplained = append(unexplained, fmt.Sprintf("%s %s at %s: %d %s", c.flow, c.op, f.at.Format("15:04:05.000"), f.status, f.body))
				}
			}
		}
	}
	var detail []string
	for k, n := range counts {
		detail = append(detail, fmt.Sprintf("%d × %s", n, k))
	}
	slices.Sort(detail)
	b.add("5xx only 502/503, only while a node was down", total, wrong, strings.Join(append(detail, unexplained...), ", "))
}

// answered checks that every request got an answer within the clients' retry bound.
func (b *books) answered() {
	unanswered := 0
	var detail []string
	for _, c := range b.calls {
		if c.status == 0 {
			unanswered++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("%s %s: %d tries, the last %d %.200s", c.op, c.key, c.tries, c.last, c.lastBody))
			}
		}
	}
	b.add("every request answered within the retry bound", len(b.calls), unanswered, strings.Join(detail, "; "))
	// Every request the clients make is valid (an approving card, amounts within what remains), so
	// every answer is a 2xx — a decline included, which the services answer 200 — and a retry after a
	// lost answer too: it is answered with what the first try did.
	refused := 0
	detail = nil
	for _, c := range b.calls {
		if c.status != 0 && (c.status < 200 || c.status > 299) {
			refused++
			if len(detail) < 3 {
				detail = append(detail, fmt.Sprintf("%s %s: %d %.200s", c.op, c.key, c.status, c.body))
			}
		}
	}
	b.add("every answer to a valid request is a 2xx", len(b.calls)-unanswered, refused, strings.Join(detail, "; "))
}

// print writes the books as tables: what the clients did, then the checks.
func (b *books) print(w io.Writer) {
	type tally struct {
		calls, retried, tries, ok, client, refused int
		sample                                     string // the first 4xx answer
	}
	var order []string
	ops := map[string]*tally{}
	for _, c := range b.calls {
		name := c.flow + ": " + c.op
		t := ops[name]
		if t == nil {
			t = &tally{}
			ops[name] = t
			order = append(order, name)
		}
		t.calls++
		t.tries += c.tries
		t.refused += c.refused
		if c.tries > 1 {
			t.retried++
		}
		switch {
		case c.status >= 200 && c.status < 300:
			t.ok++
		case c.status >= 400 && c.status < 500:
			t.client++
			if t.sample == "" {
				t.sample = fmt.Sprintf("%d %.300s", c.status, c.body)
			}
		}
	}
	slices.Sort(order)
	kills := map[string]int{}
	for _, o := range b.outages {
		kills[strings.TrimRight(o.what, " 0123456789")]++
	}
	fmt.Fprintf(w, "\n%s: %.0f s of load; restarts: %d kassa (kill -9), %d acquirer, %d postgres\n", b.backend, b.ran.Seconds(),
		kills["kassa"], kills["acquirer"], kills["postgres"])
	fmt.Fprintf(w, "%-42s %8s %8s %8s %8s %8s %10s\n", "request", "requests", "retried", "tries", "2xx", "4xx", "no answer")
	for _, name := range order {
		t := ops[name]
		fmt.Fprintf(w, "%-42s %8d %8d %8d %8d %8d %10d\n", name, t.calls, t.retried, t.tries, t.ok, t.client, t.refused)
		if t.sample != "" {
			fmt.Fprintf(os.Stderr, "drill %s: %s answered %s\n", b.backend, name, t.sample)
		}
	}
	fmt.Fprintf(w, "\n%-56s %8s %6s  %s\n", "check", "checked", "wrong", "detail")
	for _, r := range b.rows {
		fmt.Fprintf(w, "%-56s %8d %6d  %s\n", r.check, r.checked, r.wrong, r.detail)
	}
	verdict := "the books balance"
	if !b.balanced() {
		verdict = "THE BOOKS DO NOT BALANCE"
	}
	fmt.Fprintf(w, "%s: %s\n", b.backend, verdict)
}

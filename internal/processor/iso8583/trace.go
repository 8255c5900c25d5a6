package iso8583

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// series hands out the numbers of one series (a terminal's STANs, an acquirer's RRNs) from blocks
// reserved in iso8583_series: one database write per block, none per number. The write adds the
// block's size to the series' end and returns the new end in one statement, so two nodes (or two
// processes one after the other) never reserve the same number; what a process leaves unused when it
// stops is skipped.
//
// The next block is reserved ahead, in the background, as soon as a block comes into use: every sale
// of the terminal waits for the number it takes, and a block reserved only when the last one ran out
// held them all behind one write in a database busy with their attempts. A
// process that stops leaves up to two blocks unused.
type series struct {
	name string
	db   *store.DB
	size int64
	skip int64 // how far a block reserved after a promotion moves on (reserveSQL)

	mu        sync.Mutex
	next, end int64         // the block in use: [next, end)
	spare     int64         // the end of the block reserved ahead, 0 when there is none
	ahead     chan struct{} // while a reservation ahead runs: closed when it ends
}

// reserveSQL reserves a block of $2 numbers of series $1, numbered from 1; $3 is 1 + $2, the end of
// a series' first block. When the series was last reserved on another PostgreSQL timeline than the
// current one (%s: the timeline, 0 on SQLite), the database was promoted since — a failover, or a
// restore to a point in time, which forgets the blocks reserved after that point while the acquirer
// remembers the numbers — and the block starts $4 further on: past what the lost blocks could have
// handed out, unless more than $4 numbers of the series were used between the point restored to and
// the restore.
const reserveSQL = `INSERT INTO iso8583_series (name, reserved, timeline) VALUES ($1, $3, %s)
	ON CONFLICT (name) DO UPDATE SET timeline = EXCLUDED.timeline,
		reserved = iso8583_series.reserved + $2 +
			CASE WHEN iso8583_series.timeline NOT IN (0, EXCLUDED.timeline) THEN $4 ELSE 0 END
	RETURNING reserved`

// timelineSQL is the current timeline of a PostgreSQL primary: the first eight hexadecimal digits of
// the name of the WAL file it writes, which a promotion increments at once (pg_control_checkpoint's
// timeline waits for the next checkpoint).
const timelineSQL = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint`

// Skips after a promotion: a STAN series (6 digits, unique per terminal per day) moves on by a quarter
// of its cycle, so that up to three promotions in a day do not bring it back to the day's first
// numbers; an RRN series (12 digits, unique per acquirer) by a thousandth of its range.
const (
	stanSkip = 250_000
	rrnSkip  = 1_000_000_000
)

// RestoredSQL moves every series on as a promotion does (reserveSQL), in a database restored from a
// copy: "kassa restore" of an SQLite backup, which has no timeline to tell the connector, runs it on
// the copy. The acquirer remembers the numbers handed out after the copy was made.
var RestoredSQL = fmt.Sprintf(`UPDATE iso8583_series SET reserved = reserved + CASE WHEN name LIKE 'stan %%' THEN %d ELSE %d END`,
	stanSkip, rrnSkip)

// take returns the next number of the series.
func (s *series) take(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.next == s.end {
		switch {
		case s.spare != 0:
			s.next, s.end, s.spare = s.spare-s.size, s.spare, 0
		case s.ahead != nil: // the block reserved ahead is on its way
			ahead := s.ahead
			s.mu.Unlock()
			select {
			case <-ahead:
			case <-ctx.Done():
			}
			s.mu.Lock()
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if s.spare == 0 && s.next == s.end && s.ahead == nil { // it failed: reserve here, and say why
				end, err := s.reserve(ctx)
				if err != nil {
					return 0, err
				}
				s.next, s.end = end-s.size, end
			}
		default:
			end, err := s.reserve(ctx)
			if err != nil {
				return 0, err
			}
			s.next, s.end = end-s.size, end
		}
	}
	n := s.next
	s.next++
	if s.spare == 0 && s.ahead == nil {
		s.ahead = make(chan struct{})
		go s.reserveAhead(context.WithoutCancel(ctx), s.ahead)
	}
	return n, nil
}

// reserve reserves a block and returns its end.
func (s *series) reserve(ctx context.Context) (int64, error) {
	var end int64
	timeline := "0"
	if s.db.Dialect() == store.Postgres {
		timeline = timelineSQL
	}
	if err := s.db.QueryRow(ctx, []any{&end}, fmt.Sprintf(reserveSQL, timeline), s.name, s.size, 1+s.size, s.skip); err != nil {
		return 0, fmt.Errorf("iso8583: reserve numbers of %s: %w", s.name, err)
	}
	return end, nil
}

// reserveAhead reserves the next block as the spare and closes done. When it fails, take reserves
// the block itself when the one in use runs out.
func (s *series) reserveAhead(ctx context.Context, done chan struct{}) {
	end, err := s.reserve(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.spare = end
	}
	s.ahead = nil
	close(done)
}

// stanOf is the STAN of the n-th number of a terminal's series: 000001 to 999999, then again from
// 000001. The profile wants a STAN unique per terminal per day and among unanswered messages, which
// holds while a terminal sends fewer than 999,999 messages a day.
func stanOf(n int64) string { return fmt.Sprintf("%06d", (n-1)%999999+1) }

// rrnOf is the RRN of the n-th number of an acquirer's series, 12 digits: unique per acquirer (the
// profile) for the first 10^12 messages.
func rrnOf(n int64) string { return fmt.Sprintf("%012d", n%1_000_000_000_000) }

// trace identifies one message to the host before it is sent: its STAN (field 11), its transmission
// time (field 7, kept here with its year and in UTC) and its RRN (field 37). It is what Prepare
// answers, written "STAN:YYYYMMDDhhmmss:RRN" ("000123:20261123101500:000000000123").
type trace struct {
	stan string
	at   time.Time // UTC, whole seconds
	rrn  string
}

const traceTime = "20060102150405"

func (t trace) String() string { return t.stan + ":" + t.at.Format(traceTime) + ":" + t.rrn }

// f7 is field 7: the transmission date and time, MMDDhhmmss in UTC.
func (t trace) f7() string { return t.at.Format("0102150405") }

func parseTrace(s string) (trace, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 || !digits(parts[0], 6) || !digits(parts[2], 12) {
		return trace{}, fmt.Errorf("iso8583: malformed trace %q", s)
	}
	at, err := time.Parse(traceTime, parts[1])
	if err != nil {
		return trace{}, fmt.Errorf("iso8583: malformed trace %q: %w", s, err)
	}
	return trace{stan: parts[0], at: at, rrn: parts[2]}, nil
}

// reference is what Kassa keeps of an answered message as the processor's reference of the operation
// (Result.Reference, handed back as FollowUp.Original): everything a capture, refund or void needs to
// name it in field 90 and to repeat its amount. It is written "MTI:STAN:F7:RRN:amount:authcode"
// ("0200:000123:1123101500:000000000123:1999:A1B2C3"); the authorization code (field 38) comes last,
// as the host sent it, and is empty for a decline.
type reference struct {
	mti, stan, f7, rrn string
	amount             int64
	auth               string
}

func (r reference) String() string {
	return strings.Join([]string{r.mti, r.stan, r.f7, r.rrn, strconv.FormatInt(r.amount, 10), r.auth}, ":")
}

// f90 is field 90 naming this message: original MTI, STAN and field 7, then the acquirer id (11 digits,
// zero-padded) and the forwarding institution id (11 zeros).
func (r reference) f90(acquirer string) string {
	return r.mti + r.stan + r.f7 + fmt.Sprintf("%011s", acquirer) + "00000000000"
}

func parseReference(s string) (reference, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || !digits(parts[0], 4) || !digits(parts[1], 6) || !digits(parts[2], 10) || !digits(parts[3], 12) {
		return reference{}, fmt.Errorf("iso8583: %q is not a reference of this connector", s)
	}
	amount, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || amount < 0 {
		return reference{}, fmt.Errorf("iso8583: %q is not a reference of this connector", s)
	}
	return reference{mti: parts[0], stan: parts[1], f7: parts[2], rrn: parts[3], amount: amount, auth: parts[5]}, nil
}

// reversal is the 0400 that undoes a message that got no answer (processor.Unanswered.Reversal): all
// of its fields but those of the account (41, 42, the acquirer id of field 90), fixed when the
// reversal is made so that every sending is a retransmission (the profile: the same fields 7 and 11).
// It is stored as JSON.
type reversal struct {
	STAN      string `json:"stan"`      // field 11
	F7        string `json:"f7"`        // field 7
	RRN       string `json:"rrn"`       // field 37
	Amount    int64  `json:"amount"`    // field 4: the original's amount
	Currency  string `json:"currency"`  // field 49, ISO 4217 numeric
	Reference string `json:"reference"` // field 62: Kassa's reference of the operation reversed
	Original  string `json:"original"`  // field 90's first 20 digits: the MTI, STAN and field 7 reversed
}

func (r reversal) String() string {
	b, _ := json.Marshal(r) // a struct of strings and an integer always marshals
	return string(b)
}

func parseReversal(s string) (reversal, error) {
	var r reversal
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return reversal{}, fmt.Errorf("iso8583: malformed reversal: %w", err)
	}
	if !digits(r.STAN, 6) || !digits(r.F7, 10) || !digits(r.RRN, 12) || !digits(r.Currency, 3) || !digits(r.Original, 20) || r.Amount < 0 {
		return reversal{}, errors.New("iso8583: malformed reversal")
	}
	return r, nil
}

// digits reports whether s is n decimal digits.
func digits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

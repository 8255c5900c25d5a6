package reconcile

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/money"
)

// Row is one line of an acquirer's settlement report: an 0100, 0200 or 0220 the host approved.
type Row struct {
	Line           int    `json:"line"` // where it is in the report, the header being line 1
	Date           string `json:"date"` // YYYY-MM-DD, the UTC day of the report
	MTI            string `json:"mti"`  // 0100 authorization, 0200 sale or refund, 0220 capture
	ProcessingCode string `json:"processing_code"`
	// Kind is the kind of Kassa transaction the message stands for: SALE, AUTHORIZATION, CAPTURE or
	// REFUND (an 0200 with processing code 200000).
	Kind      string `json:"kind"`
	STAN      string `json:"stan"`
	RRN       string `json:"rrn"`
	Reference string `json:"reference"` // field 62: Kassa's transaction_id
	Amount    int64  `json:"amount"`    // minor units of Currency
	Currency  string `json:"currency"`  // the alphabetic code of the report's numeric one
	AuthCode  string `json:"auth_code"`
	Reversed  bool   `json:"reversed"` // undone by an 0400: a void, or a timeout reversal
}

// ReportError is a settlement report that is not as the profile writes it: where, and what.
type ReportError struct {
	Line int
	// Column is the column's name; in the header, or where encoding/csv found no CSV, its 1-based
	// position (encoding/csv counts characters); "" for the whole line.
	Column string
	Reason string
}

func (e *ReportError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("settlement report line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("settlement report line %d, column %s: %s", e.Line, e.Column, e.Reason)
}

// columns are the columns of a settlement report (acquirer-iso8583.md, "Settlement report"): what a
// valid field is, and where it goes in a row.
var columns = []struct {
	name   string
	valid  func(v string) bool
	reason string // what a field must be
	set    func(r *Row, v string)
}{
	{"date", isDay, "must be a day, YYYY-MM-DD", func(r *Row, v string) { r.Date = v }},
	// "listing every 0100, 0200 and 0220 it approved that day (0800 and 0400 messages are not listed)"
	{"mti", oneOf("0100", "0200", "0220"), "must be 0100, 0200 or 0220: the report lists no other message",
		func(r *Row, v string) { r.MTI = v }},
	// "000000 purchase / authorization, 200000 refund"
	{"processing_code", oneOf("000000", "200000"), "must be 000000 or 200000", func(r *Row, v string) { r.ProcessingCode = v }},
	{"stan", fixed(6, digits), "must be 6 digits", func(r *Row, v string) { r.STAN = v }},
	// Field 37: 12 characters, assigned by Kassa.
	{"rrn", fixed(12, printable), "must be 12 printable ASCII characters", func(r *Row, v string) { r.RRN = v }},
	{"reference", transactionID, "must be a Kassa transaction_id: 20 letters and digits", func(r *Row, v string) { r.Reference = v }},
	// Field 4: 12 digits at most, minor units.
	{"amount", func(v string) bool { return len(v) >= 1 && len(v) <= 12 && digits(v) }, "must be minor units: 1 to 12 digits",
		func(r *Row, v string) { r.Amount, _ = strconv.ParseInt(v, 10, 64) }},
	// Field 49: the ISO 4217 numeric code.
	{"currency", func(v string) bool { _, ok := money.ByNumeric(v); return ok }, "must be the numeric code of an ISO 4217 currency, e.g. 124",
		func(r *Row, v string) { c, _ := money.ByNumeric(v); r.Currency = c.Code }},
	// Field 38: 6 characters, set by the host on approval; every row was approved.
	{"auth_code", fixed(6, printable), "must be 6 printable ASCII characters", func(r *Row, v string) { r.AuthCode = v }},
	{"reversed", oneOf("true", "false"), "must be true or false", func(r *Row, v string) { r.Reversed = v == "true" }},
}

// kinds are the kinds of Kassa transaction of a report's messages, by MTI and processing code.
var kinds = map[[2]string]string{
	{"0100", "000000"}: "AUTHORIZATION",
	{"0200", "000000"}: "SALE",
	{"0220", "000000"}: "CAPTURE",
	{"0200", "200000"}: "REFUND",
}

// Parse reads a settlement report: CSV as RFC 4180 writes it, a header line naming the columns (in
// any order, each once, no other), then one row per approved operation. Every field is checked; the
// first that is not as the profile writes it is a *ReportError naming its line and column. A
// reference that appears twice is an error too: the host lists each operation once.
func Parse(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // counted here, to say which line is short
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ReportError{Line: 1, Reason: "empty: the header line is missing"}
	}
	if err != nil {
		return nil, csvError(err)
	}
	at := make([]int, len(header)) // at[i]: the index in columns of the header's field i
	seen := make([]bool, len(columns))
	for i, name := range header {
		at[i] = -1
		for c := range columns {
			if columns[c].name == name {
				at[i] = c
			}
		}
		switch {
		case at[i] < 0:
			return nil, &ReportError{Line: 1, Column: strconv.Itoa(i + 1), Reason: fmt.Sprintf("%q is not a column of the settlement report", truncate(name))}
		case seen[at[i]]:
			return nil, &ReportError{Line: 1, Column: strconv.Itoa(i + 1), Reason: fmt.Sprintf("%q appears twice", name)}
		}
		seen[at[i]] = true
	}
	for c, ok := range seen {
		if !ok {
			return nil, &ReportError{Line: 1, Reason: fmt.Sprintf("the header names no column %q", columns[c].name)}
		}
	}
	var rows []Row
	lines := map[string]int{} // reference → the line that listed it
	for {
		record, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, csvError(err)
		}
		row := Row{}
		row.Line, _ = cr.FieldPos(0)
		if len(record) != len(header) {
			return nil, &ReportError{Line: row.Line, Reason: fmt.Sprintf("%d fields where the header has %d", len(record), len(header))}
		}
		for i, v := range record {
			c := columns[at[i]]
			if !c.valid(v) {
				line, _ := cr.FieldPos(i)
				// The field itself is not quoted: a host's mistake could put a card number anywhere.
				return nil, &ReportError{Line: line, Column: c.name, Reason: c.reason}
			}
			c.set(&row, v)
		}
		if row.Kind = kinds[[2]string{row.MTI, row.ProcessingCode}]; row.Kind == "" {
			return nil, &ReportError{Line: row.Line, Column: "processing_code", Reason: "a refund (200000) is an 0200, not an " + row.MTI}
		}
		if first, ok := lines[row.Reference]; ok {
			return nil, &ReportError{Line: row.Line, Column: "reference", Reason: fmt.Sprintf("%s was listed on line %d already", row.Reference, first)}
		}
		lines[row.Reference] = row.Line
		rows = append(rows, row)
	}
}

// csvError says where encoding/csv found the report not to be CSV.
func csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ReportError{Line: pe.Line, Column: strconv.Itoa(pe.Column), Reason: "not CSV (RFC 4180): " + pe.Err.Error()}
	}
	return err
}

// isDay accepts a day written YYYY-MM-DD, and no other spelling of it.
func isDay(v string) bool {
	d, err := time.Parse(time.DateOnly, v)
	return err == nil && d.Format(time.DateOnly) == v
}

// oneOf accepts exactly one of values.
func oneOf(values ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(values, v) }
}

// fixed accepts n characters that each pass ok.
func fixed(n int, ok func(string) bool) func(string) bool {
	return func(v string) bool { return len(v) == n && ok(v) }
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// transactionID reports whether s is spelled as a transaction_id: "20 characters [A-Za-z0-9]"
// (wire-contract.md).
func transactionID(s string) bool {
	if len(s) != 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 'A' || s[i] > 'Z') && (s[i] < 'a' || s[i] > 'z') && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// truncate keeps an error message about a header field short, however long the field.
func truncate(v string) string {
	if len(v) > 40 {
		return v[:40] + "…"
	}
	return v
}

package reconcile

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
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

// columns are the columns of a settlement report, each with the check of its fields (acquirer-iso8583.md,
// "Settlement report"). A check stores the field in the row, or says what is wrong with it.
var columns = []struct {
	name  string
	check func(r *Row, v string) string
}{
	{"date", func(r *Row, v string) string {
		if d, err := time.Parse(time.DateOnly, v); err != nil || d.Format(time.DateOnly) != v {
			return "must be a day, YYYY-MM-DD"
		}
		r.Date = v
		return ""
	}},
	{"mti", func(r *Row, v string) string {
		// "listing every 0100, 0200 and 0220 it approved that day (0800 and 0400 messages are not listed)"
		if v != "0100" && v != "0200" && v != "0220" {
			return "must be 0100, 0200 or 0220: the report lists no other message"
		}
		r.MTI = v
		return ""
	}},
	{"processing_code", func(r *Row, v string) string {
		// "000000 purchase / authorization, 200000 refund"; a refund is an 0200.
		if v != "000000" && v != "200000" {
			return "must be 000000 or 200000"
		}
		r.ProcessingCode = v
		return ""
	}},
	{"stan", func(r *Row, v string) string {
		if len(v) != 6 || !digits(v) {
			return "must be 6 digits"
		}
		r.STAN = v
		return ""
	}},
	{"rrn", func(r *Row, v string) string {
		// Field 37: 12 characters, assigned by Kassa.
		if len(v) != 12 || !printable(v) {
			return "must be 12 printable ASCII characters"
		}
		r.RRN = v
		return ""
	}},
	{"reference", func(r *Row, v string) string {
		if !transactionID(v) {
			return "must be a Kassa transaction_id: 20 letters and digits"
		}
		r.Reference = v
		return ""
	}},
	{"amount", func(r *Row, v string) string {
		// Field 4: at most 12 digits, minor units.
		if len(v) == 0 || len(v) > 12 || !digits(v) {
			return "must be minor units: 1 to 12 digits"
		}
		r.Amount, _ = strconv.ParseInt(v, 10, 64)
		return ""
	}},
	{"currency", func(r *Row, v string) string {
		// Field 49: the ISO 4217 numeric code.
		c, ok := money.ByNumeric(v)
		if !ok {
			return "must be the numeric code of an ISO 4217 currency, e.g. 124"
		}
		r.Currency = c.Code
		return ""
	}},
	{"auth_code", func(r *Row, v string) string {
		// Field 38: 6 characters, set by the host on approval; every row was approved.
		if len(v) != 6 || !printable(v) {
			return "must be 6 printable ASCII characters"
		}
		r.AuthCode = v
		return ""
	}},
	{"reversed", func(r *Row, v string) string {
		if v != "true" && v != "false" {
			return "must be true or false"
		}
		r.Reversed = v == "true"
		return ""
	}},
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
			if reason := columns[at[i]].check(&row, v); reason != "" {
				line, _ := cr.FieldPos(i)
				// The field itself is not quoted: a host's mistake could put a card number anywhere.
				return nil, &ReportError{Line: line, Column: columns[at[i]].name, Reason: reason}
			}
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

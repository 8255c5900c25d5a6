package reconcile_test

import (
	"encoding/csv"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/reconcile"
)

// header is the header line of the profile's settlement report.
const header = "date,mti,processing_code,stan,rrn,reference,amount,currency,auth_code,reversed"

// example is the profile's own example row.
const example = "2026-11-23,0200,000000,000123,000000000123,9KD3M0QX2Z4W8R1T6Y5P,1999,124,A1B2C3,false"

// writeReport writes rows as a host writes its settlement report: RFC 4180, CRLF line ends.
func writeReport(t testing.TB, rows []reconcile.Row) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.UseCRLF = true
	w.Write(strings.Split(header, ","))
	for _, r := range rows {
		c, ok := money.Lookup(r.Currency)
		if !ok {
			t.Fatalf("no currency %q", r.Currency)
		}
		w.Write([]string{r.Date, r.MTI, r.ProcessingCode, r.STAN, r.RRN, r.Reference, strconv.FormatInt(r.Amount, 10),
			c.Numeric(), r.AuthCode, strconv.FormatBool(r.Reversed)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestParseReadsTheProfilesReport(t *testing.T) {
	t.Parallel()
	for name, report := range map[string]string{
		"the profile's example": header + "\n" + example + "\n",
		"CRLF, quoted fields, no final line end": header + "\r\n" +
			`"2026-11-23","0200","000000","000123","000000000123","9KD3M0QX2Z4W8R1T6Y5P","1999","124","A1B2C3","false"` + "\r\n" +
			"2026-11-23,0200,200000,000124,000000000124,QX2Z4W8R1T6Y5P9KD3M0,500,840,A1B2C4,false\r\n" +
			"2026-11-23,0100,000000,000125,00000000012 ,R1T6Y5P9KD3M0QX2Z4W8,0,978,ZZZZZ9,true",
		"columns in another order": "reference,reversed,date,mti,processing_code,stan,rrn,amount,currency,auth_code\n" +
			"9KD3M0QX2Z4W8R1T6Y5P,false,2026-11-23,0200,000000,000123,000000000123,1999,124,A1B2C3\n",
	} {
		rows, err := reconcile.Parse(strings.NewReader(report))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := reconcile.Row{Line: 2, Date: "2026-11-23", MTI: "0200", ProcessingCode: "000000", Kind: "SALE", STAN: "000123",
			RRN: "000000000123", Reference: "9KD3M0QX2Z4W8R1T6Y5P", Amount: 1999, Currency: "CAD", AuthCode: "A1B2C3"}
		if len(rows) == 0 || rows[0] != want {
			t.Fatalf("%s: rows %+v, want first %+v", name, rows, want)
		}
	}
	rows, _ := reconcile.Parse(strings.NewReader(header + "\n" + example + "\n" +
		"2026-11-23,0200,200000,000124,000000000124,QX2Z4W8R1T6Y5P9KD3M0,500,840,A1B2C4,false\n" +
		"2026-11-23,0100,000000,000125,000000000125,R1T6Y5P9KD3M0QX2Z4W8,0,978,ZZZZZ9,true\n" +
		"2026-11-23,0220,000000,000126,000000000126,Z4W8R1T6Y5P9KD3M0QX2,000000000450,392,ZZZZZ8,false\n"))
	var got []string
	for _, r := range rows {
		got = append(got, r.Kind+" "+strconv.FormatInt(r.Amount, 10)+" "+r.Currency+" "+strconv.FormatBool(r.Reversed)+" line "+strconv.Itoa(r.Line))
	}
	if want := []string{"SALE 1999 CAD false line 2", "REFUND 500 USD false line 3", "AUTHORIZATION 0 EUR true line 4", "CAPTURE 450 JPY false line 5"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if rows, err := reconcile.Parse(strings.NewReader(header + "\r\n")); err != nil || len(rows) != 0 {
		t.Fatalf("a report of a day without approvals: %v, %v", rows, err)
	}
}

func TestParseNamesTheLineAndColumnAtFault(t *testing.T) {
	t.Parallel()
	row := strings.Split(example, ",")
	// with is a report whose line 3 is the example with fields changed, by column index.
	with := func(set map[int]string) string {
		r := append([]string(nil), row...)
		for i, v := range set {
			r[i] = v
		}
		return header + "\n" + example + "\n" + strings.Join(r, ",") + "\n"
	}
	for _, tc := range []struct {
		name, report string
		line         int
		column       string
		reason       string
	}{
		{"empty", "", 1, "", "header line is missing"},
		{"no header", example + "\n", 1, "1", `"2026-11-23" is not a column`},
		{"a column missing", strings.TrimSuffix(header, ",reversed") + "\n", 1, "", `no column "reversed"`},
		{"a column twice", header + ",amount\n", 1, "11", `"amount" appears twice`},
		{"a header in capitals", strings.ToUpper(header) + "\n", 1, "1", `"DATE" is not a column`},
		{"a short row", header + "\n" + example + "\n" + strings.TrimSuffix(example, ",false") + "\n", 3, "", "9 fields where the header has 10"},
		{"a long row", header + "\n" + example + ",x\n", 2, "", "11 fields where the header has 10"},
		{"a bare quote", header + "\n2026-11-23,02\"00,000000\n", 2, "14", "not CSV"},
		{"an unterminated quote", header + "\n" + example + "\n\"2026-11-23,0200\n", 3, "18", "not CSV"},
		{"a date of another form", with(map[int]string{0: "2026-11-3"}), 3, "date", "YYYY-MM-DD"},
		{"a date that is not a day", with(map[int]string{0: "2026-02-30"}), 3, "date", "YYYY-MM-DD"},
		{"an unlisted message", with(map[int]string{1: "0400"}), 3, "mti", "0100, 0200 or 0220"},
		{"a processing code of a balance enquiry", with(map[int]string{2: "310000"}), 3, "processing_code", "000000 or 200000"},
		{"a refund that is no 0200", with(map[int]string{1: "0100", 2: "200000"}), 3, "processing_code", "a refund (200000) is an 0200"},
		{"a short STAN", with(map[int]string{3: "12345"}), 3, "stan", "6 digits"},
		{"a STAN of letters", with(map[int]string{3: "12345A"}), 3, "stan", "6 digits"},
		{"a short RRN", with(map[int]string{4: "00000000012"}), 3, "rrn", "12 printable"},
		{"an RRN with a tab", with(map[int]string{4: "00000000012\t"}), 3, "rrn", "12 printable"},
		{"a reference of 19", with(map[int]string{5: "9KD3M0QX2Z4W8R1T6Y5"}), 3, "reference", "transaction_id"},
		{"a reference with a dash", with(map[int]string{5: "9KD3M0QX2Z4W8R1T6Y-P"}), 3, "reference", "transaction_id"},
		{"a decimal amount", with(map[int]string{6: "19.99"}), 3, "amount", "minor units"},
		{"a negative amount", with(map[int]string{6: "-1999"}), 3, "amount", "minor units"},
		{"an amount of 13 digits", with(map[int]string{6: "1000000000000"}), 3, "amount", "minor units"},
		{"an empty amount", with(map[int]string{6: ""}), 3, "amount", "minor units"},
		{"an alphabetic currency", with(map[int]string{7: "CAD"}), 3, "currency", "ISO 4217"},
		{"an unknown currency", with(map[int]string{7: "999"}), 3, "currency", "ISO 4217"},
		{"no authorization code", with(map[int]string{8: ""}), 3, "auth_code", "6 printable"},
		{"reversed as a number", with(map[int]string{9: "1"}), 3, "reversed", "true or false"},
		{"reversed in capitals", with(map[int]string{9: "TRUE"}), 3, "reversed", "true or false"},
		{"a reference twice", header + "\n" + example + "\n" + strings.Replace(example, "000123", "000124", 2) + "\n", 3, "reference", "listed on line 2 already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := reconcile.Parse(strings.NewReader(tc.report))
			var re *reconcile.ReportError
			if !errors.As(err, &re) {
				t.Fatalf("Parse = %v, %v; want a *ReportError", rows, err)
			}
			if re.Line != tc.line || re.Column != tc.column || !strings.Contains(re.Reason, tc.reason) {
				t.Fatalf("error %q (line %d, column %q); want line %d, column %q, saying %q", re, re.Line, re.Column, tc.line, tc.column, tc.reason)
			}
			if !strings.Contains(re.Error(), "line "+strconv.Itoa(tc.line)) {
				t.Fatalf("error %q does not name line %d", re, tc.line)
			}
		})
	}
}

// FuzzParse: whatever the bytes, Parse answers rows or a *ReportError naming a line, never panics;
// and the rows it accepts are as the profile writes them: written back and read again, they are the
// same rows.
func FuzzParse(f *testing.F) {
	f.Add(header + "\n" + example + "\n")
	f.Add(header + "\r\n" + example + "\r\n" + strings.Replace(strings.Replace(example, "0200,000000", "0200,200000", 1), "9KD3", "9KD4", 1) + "\r\n")
	f.Add(header + "\n\"2026-11-23\",\"0100\",000000,000001,\"RRN  \"\"quoted\",AAAAAAAAAAAAAAAAAAAA,0,978,abc123,true\n")
	f.Add(header + "\n" + example + ",\n")
	f.Add(header + "\n2026-11-23,02\"00\n")
	f.Add("reversed,date\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, report string) {
		rows, err := reconcile.Parse(strings.NewReader(report))
		if err != nil {
			var re *reconcile.ReportError
			if !errors.As(err, &re) || re.Line < 1 {
				t.Fatalf("Parse error %v is not a *ReportError naming a line", err)
			}
			return
		}
		again, err := reconcile.Parse(strings.NewReader(writeReport(t, rows)))
		if err != nil {
			t.Fatalf("rows written back do not parse: %v", err)
		}
		for i := range rows {
			rows[i].Line, again[i].Line = 0, 0
		}
		if !reflect.DeepEqual(rows, again) {
			t.Fatalf("rows %+v read back as %+v", rows, again)
		}
	})
}

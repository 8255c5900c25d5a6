package dashboard

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/history"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// MaxExport is the most rows an export holds: the CSV export of a list's current filter (RFC 4180)
// is streamed with constant memory, up to 1,000,000 rows.
const MaxExport = 1_000_000

// exportPage is how many transactions the export reads, writes and flushes at a time: what it holds
// in memory, whatever the export's size.
const exportPage = 1000

// RowsHeader is the response header of an export that says how many rows it holds (at most
// MaxExport), counted before the first is sent, so that the page can show the download's progress.
const RowsHeader = "Kassa-Export-Rows"

// exportColumns are the export's columns: the gateway API's transaction fields (payment.Wire, the
// entities of GET /transaction-service/transaction), named and ordered as the JSON is, so that a row
// reads as the API's object does.
var exportColumns = func() []string {
	var out []string
	wt := reflect.TypeFor[payment.Wire]()
	for i := range wt.NumField() {
		name, _, _ := strings.Cut(wt.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}()

// csvRow is a transaction as a row of the export: each field as the API's JSON has it, a field the
// JSON leaves out (omitempty) empty. A value that a spreadsheet would run as a formula (=, +, -, @,
// tab, carriage return first) is prefixed with ' (OWASP, "CSV Injection").
func csvRow(w payment.Wire, out []string) []string {
	v := reflect.ValueOf(w)
	out = out[:0]
	for i := range v.NumField() {
		f := v.Field(i)
		_, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		var s string
		switch x := f.Interface().(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		case bool:
			s = strconv.FormatBool(x)
		case int64:
			if x != 0 || opts != "omitempty" {
				s = strconv.FormatInt(x, 10)
			}
		}
		if f.Kind() == reflect.String {
			s = cell(s)
		}
		out = append(out, s)
	}
	return out
}

// cell is a text field of an export as a spreadsheet may open it: a value that it would run as a
// formula (=, +, -, @, tab, carriage return first) is prefixed with ' (OWASP, "CSV Injection").
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// stream sends the CSV download of file (RFC 4180: a header row, CRLF line ends, fields quoted where
// needed): the header row columns, then each row that rows emits, every exportPage rows flushed to the
// client before the next are read, so that an export's memory does not grow with its rows. When rows
// fails after rows were sent, which cannot be taken back, the connection is cut, so that the download
// fails rather than looking complete; what names the export in the operator's log.
func stream(w http.ResponseWriter, r *http.Request, file string, columns []string, what string, rows func(emit func([]string) error) error) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/csv; charset=utf-8; header=present")
	hdr.Set("Content-Disposition", `attachment; filename="`+file+`"`)
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	rc := http.NewResponseController(w)
	flush := func() error {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		return rc.Flush()
	}
	_ = cw.Write(columns)
	written := 0
	err := rows(func(row []string) error {
		if err := cw.Write(row); err != nil {
			return err
		}
		if written++; written%exportPage == 0 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		// The rows already sent cannot be taken back: the connection is cut, so that the download
		// fails rather than looking complete.
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard: export "+what, "err", err, "rows", written)
		panic(http.ErrAbortHandler)
	}
}

// exportCSV streams the transactions of the list's filter as CSV (RFC 4180: a header row, CRLF line
// ends, fields quoted where needed), newest first, a page of exportPage at a time, each page flushed
// to the client before the next is read: the memory an export takes does not grow with its rows. Sales
// staff export their own transactions, as they list them.
func (h *Handler) exportCSV(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	form, f, bad := parseList(r.URL.Query(), m.Location())
	if bad != nil {
		lv := &listView{Form: form, Kinds: kinds, Zone: m.Location().String(), Invalid: bad.Field, Filtered: true}
		h.render(w, r, http.StatusBadRequest, "transactions", view{Title: "Transactions", Wide: true, Error: bad.Message, Data: lv})
		return
	}
	scope(sess, &f)
	f.After, f.Before, f.Limit = 0, 0, exportPage
	n, err := h.cfg.Ledger.Count(r.Context(), m.ID, f, MaxExport)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set(RowsHeader, strconv.Itoa(n))
	file := "transactions-" + h.cfg.Now().In(m.Location()).Format("20060102-150405") + ".csv"
	row := make([]string, 0, len(exportColumns))
	stream(w, r, file, exportColumns, "transactions", func(emit func([]string) error) error {
		return h.cfg.Ledger.Each(r.Context(), m.ID, f, MaxExport, func(t payment.Transaction) error {
			row = csvRow(t.Wire(), row)
			return emit(row)
		})
	})
}

// activityColumns are the activity export's columns, one history entry a row: when (RFC 3339, UTC),
// the entry's source ("audit" for an audit record, "ledger" for a ledger row that is its operation's
// record), the staff user (id and e-mail) or the API client, what was done and to which transaction
// or record, the amount (in major units, as the API shows it) and currency, the outcome, the detail,
// the request and the address it came from.
var activityColumns = []string{"time", "source", "user_id", "user_email", "client_id", "operation", "transaction_id", "resource",
	"amount", "currency", "outcome", "detail", "request_id", "address"}

// exportActivity streams the history that the Activity page's filter selects as CSV (activityColumns),
// newest first, a page of the history at a time, each flushed to the client before the next is read:
// the memory an export takes does not grow with its rows. It holds at most MaxExport rows, the
// merchant's own only; a sales user's, its own records.
func (h *Handler) exportActivity(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	f, bad := activityQuery(sess, r.URL.Query())
	if bad != nil {
		h.fail(w, r, bad)
		return
	}
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var emails map[string]string
	if err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		staff, err := user.List(r.Context(), q, sess.MerchantID)
		emails = emailsOf(staff)
		return err
	}); err != nil {
		h.fail(w, r, err)
		return
	}
	file := "activity-" + h.cfg.Now().In(m.Location()).Format("20060102-150405") + ".csv"
	f.Limit = audit.MaxLimit
	row := make([]string, len(activityColumns))
	stream(w, r, file, activityColumns, "activity", func(emit func([]string) error) error {
		return history.Each(r.Context(), h.cfg.DB, sess.MerchantID, f, MaxExport, func(e history.Entry) error {
			source, amount := "audit", ""
			if e.Seq != 0 {
				source = "ledger"
			}
			if c, ok := money.Lookup(e.Currency); ok {
				amount = money.Format(e.Amount, c)
			}
			for i, v := range []string{e.At.UTC().Format(time.RFC3339Nano), source, e.UserID, emails[e.UserID], e.ClientID, e.Operation,
				e.TransactionID, e.Resource, amount, e.Currency, e.Outcome, e.Detail, e.RequestID, e.Address} {
				row[i] = cell(v)
			}
			return emit(row)
		})
	})
}

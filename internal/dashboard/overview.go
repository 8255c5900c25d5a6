package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/report"

	"golang.org/x/text/language"
)

// overviewPage is what the overview shows: for today, the last 7 and the last 30
// days, per currency, gross volume, approved count, approval rate, refunds and net; a chart of daily
// volume and one of approvals and declines; the top decline reasons; billing at a glance — of live
// or of test transactions, never both together.
type overviewPage struct {
	Test      bool   // test transactions are shown
	Zone      string // the merchant's time zone, whose days these are
	Figures   []currencyFigures
	Currency  string     // the volume chart's
	Switch    []modeLink // the other currencies of the volume chart
	Volume    chartView
	Outcomes  chartView
	Reasons   []reasonRow
	Billing   report.Billing
	Loc       *time.Location
	LiveLink  string
	TestLink  string
	HasCharts bool
}

// currencyFigures are a currency's figures over report.Periods, a row per measure.
type currencyFigures struct {
	Code string
	Rows []figureRow
}

type figureRow struct {
	Name  string
	Cells [len(report.Periods)]string
}

// figures lays out a currency's totals over report.Periods, amounts in lang.
func figures(o report.Overview, c money.Currency, lang language.Tag) currencyFigures {
	var t [len(report.Periods)]report.Totals
	for i, days := range report.Periods {
		t[i] = o.Period(c.Code, days)
	}
	row := func(name string, cell func(report.Totals) string) figureRow {
		r := figureRow{Name: name}
		for i := range t {
			r.Cells[i] = cell(t[i])
		}
		return r
	}
	return currencyFigures{Code: c.Code, Rows: []figureRow{
		row("Gross volume", func(t report.Totals) string { return money.Display(t.Gross, c, lang) }),
		row("Approved", func(t report.Totals) string { return count(t.Approved) }),
		row("Approval rate", func(t report.Totals) string { return permille(t.Approved, t.Attempts()) }),
		row("Refunds", func(t report.Totals) string { return money.Display(t.Refunds, c, lang) }),
		row("Net", func(t report.Totals) string { return money.Display(t.Net(), c, lang) }),
	}}
}

// chartView is a chart and its data table: a caption, the columns after the date, and a row per day.
type chartView struct {
	chart
	Caption string
	Columns []string
	Rows    []chartRow
}

type chartRow struct {
	Date   time.Time
	Values []string
}

type modeLink struct {
	Name, Href string
}

// reasonRow is a decline code with its text and counts over report.Periods.
type reasonRow struct {
	Code, Text string
	Counts     [len(report.Periods)]int64
}

// topReasons is how many decline reasons the overview lists.
const topReasons = 10

// overview serves the Home page of the readers: the merchant's overview. ?mode=live|test chooses the
// transactions (by default those of where the merchant's payments go now: live with a live processor,
// test with the simulator), ?currency= the volume chart's currency (by default the one of the most
// volume).
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	var test bool
	switch q.Get("mode") {
	case "":
		test = !h.cfg.Ledger.Live(r.Context(), m.ID)
	case "live":
	case "test":
		test = true
	default:
		h.render(w, r, http.StatusBadRequest, "message", view{Title: "Overview", Error: "mode must be live or test."})
		return
	}
	var chosen money.Currency
	if c := q.Get("currency"); c != "" {
		var ok bool
		if chosen, ok = money.Lookup(c); !ok {
			h.render(w, r, http.StatusBadRequest, "message", view{Title: "Overview", Error: "currency: " + c + " is not a currency code."})
			return
		}
	}
	loc, now := m.Location(), h.cfg.Now()
	o, err := report.Load(r.Context(), h.cfg.DB, report.Query{MerchantID: m.ID, Location: loc, Now: now, TestMode: test})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	billing, err := report.LoadBilling(r.Context(), h.cfg.DB, m.ID, report.EndOfDay(now, loc))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := overviewPage{Test: test, Zone: loc.String(), Billing: billing, Loc: loc, HasCharts: len(o.Currencies) > 0}
	for _, code := range o.Currencies {
		c, _ := money.Lookup(code)
		p.Figures = append(p.Figures, figures(o, c, m.Language()))
		if chosen.Code == "" {
			chosen = c
		}
	}
	p.Currency = chosen.Code
	link := func(mode, currency string) string {
		v := url.Values{"mode": {mode}}
		if currency != "" {
			v.Set("currency", currency)
		}
		return "/dashboard?" + v.Encode()
	}
	mode := map[bool]string{false: "live", true: "test"}[test]
	p.LiveLink, p.TestLink = link("live", ""), link("test", "")
	for _, code := range o.Currencies {
		if code != chosen.Code {
			p.Switch = append(p.Switch, modeLink{Name: code, Href: link(mode, code)})
		}
	}
	if p.HasCharts {
		p.Volume, p.Outcomes = volumeChart(o, chosen, mode, m.Language()), outcomesChart(o, mode)
	}
	for _, rs := range o.Reasons[:min(len(o.Reasons), topReasons)] {
		text := processor.Messages[rs.Code]
		if text == "" {
			text = strings.ReplaceAll(rs.Code, "_", " ")
		}
		p.Reasons = append(p.Reasons, reasonRow{Code: rs.Code, Text: text, Counts: rs.Counts})
	}
	h.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Wide: true, TestData: test, Data: p})
}

// volumeChart is the chart of the gross volume per day in currency c, with its table; the table and
// the description read amounts in lang, the axis' ticks are plain numbers of the caption's currency.
func volumeChart(o report.Overview, c money.Currency, mode string, lang language.Tag) chartView {
	daily := o.Daily[c.Code]
	values := make([]int64, len(o.Dates))
	var total, top int64
	topDay := 0
	for i := range values {
		if daily != nil {
			values[i] = daily[i].Gross
		}
		total += values[i]
		if values[i] > top {
			top, topDay = values[i], i
		}
	}
	format := func(v int64) string { return strings.TrimSuffix(strings.TrimRight(money.Format(v, c), "0"), ".") }
	if c.Digits == 0 {
		format = func(v int64) string { return money.Format(v, c) }
	}
	desc := "Gross volume per day of the last 30 days, " + mode + " transactions, in " + c.Code + ": " + money.Display(total, c, lang) + " in all"
	if top > 0 {
		desc += ", the most " + money.Display(top, c, lang) + " on " + o.Dates[topDay].Format("January 2")
	}
	v := chartView{chart: newChart("volume", "Daily volume in "+c.Code, desc+". The table beside the chart lists every day.",
		o.Dates, []chartSeries{{Name: "volume", Class: "bar-volume", Values: values}}, format),
		Caption: "Daily volume in " + c.Code + ", today first", Columns: []string{"Gross volume (" + c.Code + ")"}}
	v.Rows = chartRows(o.Dates, func(i int) []string { return []string{money.Display(values[i], c, lang)} })
	return v
}

// outcomesChart is the chart of approved and declined sales and authorizations per day, all
// currencies together, with its table.
func outcomesChart(o report.Overview, mode string) chartView {
	out := o.Outcomes()
	approved, declined := make([]int64, len(out)), make([]int64, len(out))
	var a, d int64
	for i, t := range out {
		approved[i], declined[i] = t.Approved, t.Declined
		a, d = a+t.Approved, d+t.Declined
	}
	desc := "Approved and declined sales and authorizations per day of the last 30 days, " + mode + " transactions, all currencies: " +
		count(a) + " approved and " + count(d) + " declined in all (" + permille(a, a+d) + " approved). The table beside the chart lists every day."
	v := chartView{chart: newChart("outcomes", "Approvals and declines", desc, o.Dates, []chartSeries{
		{Name: "approved", Class: "bar-approved", Values: approved},
		{Name: "declined", Class: "bar-declined", Values: declined},
	}, count), Caption: "Approved and declined sales and authorizations per day, today first",
		Columns: []string{"Approved", "Declined", "Approval rate"}}
	v.Rows = chartRows(o.Dates, func(i int) []string {
		return []string{count(approved[i]), count(declined[i]), permille(approved[i], approved[i]+declined[i])}
	})
	return v
}

// chartRows are the rows of a chart's table, today first: each date with the cells of its day.
func chartRows(dates []time.Time, cells func(day int) []string) []chartRow {
	rows := make([]chartRow, len(dates))
	for i, d := range dates {
		rows[len(dates)-1-i] = chartRow{Date: d, Values: cells(i)}
	}
	return rows
}

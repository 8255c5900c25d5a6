package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
)

// Billing → Plans: the list; create, edit and delete, a plan in use refused (409) with the reason said.
// Readers see the plans; managers make, change and delete them, through the plan service's own rules
// (plan.Service Create, Update, Remove), so that a plan made here is one the API would have made.

// plansPage is what the plans list shows.
type plansPage struct {
	Plans   []planRow
	Pager   pager
	CanEdit bool
	Empty   *emptyState // in place of the table when there is no plan
}

// planRow is one plan as the list shows it.
type planRow struct {
	LookupID, Name, Amount, Frequency, Payments string
	Receipt                                     bool
	Current, Total                              int
}

// payments says how many payments a plan or subscription makes.
func payments(n int) string {
	if n == 0 {
		return "until canceled"
	}
	return strconv.Itoa(n)
}

// plans lists the merchant's plans, newest first.
func (h *Handler) plans(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	q := r.URL.Query()
	c := cursorsOf(q)
	pg := plansPage{CanEdit: isManager(sess.Role)}
	after, before, err := c.rowIDs()
	var list []plan.Plan
	if err == nil {
		list, err = h.cfg.Plans.List(r.Context(), sess.MerchantID, pageSize+1, before, after)
	}
	if h.listRefused(w, r, "plans", "Plans", pg, err) {
		return
	}
	list, more := trimPage(list, c)
	lang := h.lang(r)
	for _, p := range list {
		pg.Plans = append(pg.Plans, planRow{LookupID: p.LookupID, Name: p.Name, Amount: money.Display(p.Amount, p.Currency, lang),
			Frequency: string(p.Frequency), Payments: payments(p.NumberOfPayments), Receipt: p.SendReceipt,
			Current: p.CurrentSubscriptions, Total: p.TotalSubscriptions})
	}
	if len(list) == 0 {
		pg.Empty = &emptyState{ID: "plans-empty", Heading: "No plans yet",
			About:  "A plan is what customers subscribe to: an amount billed every day, week, month, quarter or year.",
			Action: actionIf(pg.CanEdit, link{"Create a plan", "/dashboard/plans/new"})}
	}
	if n := len(list); n > 0 {
		pg.Pager = c.links(q, strconv.FormatInt(list[0].ID, 10), strconv.FormatInt(list[n-1].ID, 10), more)
	}
	v := view{Title: "Plans", Data: pg}
	if q.Get("deleted") != "" {
		v.Notice = "The plan " + q.Get("deleted") + " is deleted."
	}
	h.render(w, r, http.StatusOK, "plans", v)
}

// planForm is what the plan page shows: a plan's fields, as a form for managers, and the field a
// refusal names.
type planForm struct {
	New                                         bool
	LookupID, Name, Amount, Currency, Frequency string
	Shown                                       string // Amount as people read it, in the merchant's locale: what those who may not edit see
	Payments                                    string
	Receipt                                     bool
	Current, Total                              int
	Currencies                                  []string
	Frequencies                                 []plan.Frequency
	CanEdit                                     bool
	Field, FieldError                           string // the field at fault and why
}

// frequencies are the frequencies a plan may have, in the form's order.
var frequencies = []plan.Frequency{plan.Daily, plan.Weekly, plan.Monthly, plan.Quarterly, plan.Annually}

// newPlan shows the form of a new plan.
func (h *Handler) newPlan(w http.ResponseWriter, r *http.Request) {
	h.renderPlan(w, r, http.StatusOK, planForm{New: true, Frequency: string(plan.Monthly)}, view{})
}

// renderPlan shows f with the merchant's currencies, for managers as a form.
func (h *Handler) renderPlan(w http.ResponseWriter, r *http.Request, status int, f planForm, v view) {
	sess := signedIn(r)
	m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f.Currencies, f.Frequencies, f.CanEdit = m.Currencies, frequencies, isManager(sess.Role)
	if f.Currency == "" {
		f.Currency = m.DefaultCurrency
	}
	if c, ok := money.Lookup(f.Currency); ok {
		if minor, err := money.Parse(f.Amount, c); err == nil {
			f.Shown = money.Display(minor, c, m.Language())
		}
	}
	v.Title, v.Data = "Plan "+f.Name, f
	if f.New {
		v.Title = "New plan"
	}
	h.render(w, r, status, "plan", v)
}

// formOf is a plan's form as it stands.
func formOf(p plan.Plan) planForm {
	return planForm{LookupID: p.LookupID, Name: p.Name, Amount: money.Format(p.Amount, p.Currency), Currency: p.Currency.Code,
		Frequency: string(p.Frequency), Payments: strconv.Itoa(p.NumberOfPayments), Receipt: p.SendReceipt,
		Current: p.CurrentSubscriptions, Total: p.TotalSubscriptions}
}

// showPlan shows one of the merchant's plans: another merchant's is not found.
func (h *Handler) showPlan(w http.ResponseWriter, r *http.Request) {
	p, ok := h.readPlan(w, r)
	if !ok {
		return
	}
	v := view{}
	switch r.URL.Query().Get("saved") {
	case "created":
		v.Notice = "The plan is made. Customers can be subscribed to it now."
	case "changed":
		v.Notice = "The plan is saved. Subscriptions made before keep the terms they were made with."
	}
	h.renderPlan(w, r, http.StatusOK, formOf(p), v)
}

// readPlan reads the plan of the request's path; without one it shows why and reports false.
func (h *Handler) readPlan(w http.ResponseWriter, r *http.Request) (plan.Plan, bool) {
	var p plan.Plan
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		p, err = plan.Get(r.Context(), q, signedIn(r).MerchantID, r.PathValue("plan"))
		return err
	})
	if h.answerRefusal(w, r, err, func(status int, msg string) {
		h.render(w, r, status, "message", view{Title: "No such plan", Error: "This merchant has no such plan."})
	}) {
		return p, false
	}
	return p, true
}

// planBody reads the plan form into the plan service's body. Every field is sent, so that an edit
// may also clear the receipt box.
func planBody(r *http.Request) (plan.Body, planForm) {
	form := planForm{Name: r.PostFormValue("name"), Amount: r.PostFormValue("amount"), Currency: r.PostFormValue("currency"),
		Frequency: r.PostFormValue("frequency"), Payments: r.PostFormValue("number_of_payments"), Receipt: r.PostFormValue("send_receipt") == "true"}
	receipt := "false"
	if form.Receipt {
		receipt = "true"
	}
	return plan.Body{Name: sent(form.Name), Amount: sent(form.Amount), Currency: sent(form.Currency),
		Frequency: sent(form.Frequency), NumberOfPayments: sent(form.Payments), SendReceipt: field.Form(receipt)}, form
}

// sent is a plan form's field as the plan service reads a JSON body's: an empty field is one not sent
// (a required one is then named as missing; number_of_payments keeps its default).
func sent(s string) field.Value {
	if s == "" {
		return field.Value{}
	}
	return field.Form(s)
}

// createPlan makes a plan from the form, or shows the form again with the field at fault.
func (h *Handler) createPlan(w http.ResponseWriter, r *http.Request) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, form := planBody(r)
	form.New = true
	p, err := h.cfg.Plans.Create(r.Context(), m, b)
	if h.planRefused(w, r, err, form) {
		return
	}
	http.Redirect(w, r, "/dashboard/plans/"+p.LookupID+"?saved=created", http.StatusSeeOther)
}

// updatePlan saves the form's changes to a plan.
func (h *Handler) updatePlan(w http.ResponseWriter, r *http.Request) {
	m, err := h.cfg.Merchants.Get(r.Context(), signedIn(r).MerchantID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	b, form := planBody(r)
	form.LookupID = r.PathValue("plan")
	p, err := h.cfg.Plans.Update(r.Context(), m, form.LookupID, b)
	if h.planRefused(w, r, err, form) {
		return
	}
	http.Redirect(w, r, "/dashboard/plans/"+p.LookupID+"?saved=changed", http.StatusSeeOther)
}

// planRefused shows the form again when the plan service refused it: the message beside the field it
// names, or above the form. It reports whether it answered.
func (h *Handler) planRefused(w http.ResponseWriter, r *http.Request, err error, form planForm) bool {
	return h.answerRefusal(w, r, err, func(status int, msg string) {
		var f *fault.Error
		errors.As(err, &f)
		if status == http.StatusNotFound {
			h.notFound(w, r)
			return
		}
		v := view{Error: "The plan is not saved. " + msg}
		if f.Field != "" {
			form.Field, form.FieldError = f.Field, msg
			v.Error = "The plan is not saved. Check the field marked below."
		}
		h.renderPlan(w, r, status, form, v)
	})
}

// deletePlan deletes a plan without current subscriptions. One with them is the API's 409, said as
// what it means and what to do.
func (h *Handler) deletePlan(w http.ResponseWriter, r *http.Request) {
	p, ok := h.readPlan(w, r)
	if !ok {
		return
	}
	err := h.cfg.Plans.Remove(r.Context(), p.MerchantID, p.LookupID)
	var f *fault.Error
	if errors.As(err, &f) && f.Code == "plan_in_use" {
		h.renderPlan(w, r, http.StatusConflict, formOf(p), view{Error: inUse(p)})
		return
	}
	if h.planRefused(w, r, err, formOf(p)) {
		return
	}
	http.Redirect(w, r, "/dashboard/plans?deleted="+url.QueryEscape(p.Name), http.StatusSeeOther)
}

// inUse says why a plan with current subscriptions cannot be deleted, and what to do.
func inUse(p plan.Plan) string {
	n := strconv.Itoa(p.CurrentSubscriptions) + " subscriptions"
	if p.CurrentSubscriptions == 1 {
		n = "1 subscription"
	}
	return "The plan " + p.Name + " cannot be deleted while customers are subscribed to it: it has " + n +
		" that are active, retrying, suspended or paused. Cancel them first (Billing lists them), then delete the plan."
}

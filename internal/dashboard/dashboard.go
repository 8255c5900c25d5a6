// Package dashboard serves the merchant dashboard under /dashboard: server-rendered pages for a
// merchant's staff, signed in with their e-mail and password.
//
// The pages are html/template files embedded in the binary, one layout (a header with the
// merchant's name, the sections the user's role may open, and sign-out) and one template per page.
// They work without script. Every response carries a strict Content-Security-Policy (styles by a
// per-response nonce, no script, forms only to Kassa, frame-ancestors 'none'). Every POST is
// refused when another site sent it (http.CrossOriginProtection) and, once signed in, when its
// csrf_token is not the session's. Every page and action checks the user's role on the server
// (requireRole): a hidden button is not a permission.
//
// A new section is a page template, an entry in sections (its name, path and roles), and its routes
// registered through requireRole with the roles they need.
package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/invoice"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/webhook"

	"golang.org/x/text/language"
)

//go:embed *.html
var files embed.FS

// pages are the templates, one set per page file (name.html is page "name"), each with the layout
// and the shared partials (partials.html). A page defines "content", and may define "style" (rules of
// its own, inside the layout's nonce'd style element).
var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	names, err := fs.Glob(files, "*.html")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		if name == "layout.html" || name == "partials.html" {
			continue
		}
		out[strings.TrimSuffix(name, ".html")] = template.Must(template.New(name).Funcs(funcs).ParseFS(files, "layout.html", "partials.html", name))
	}
	return out
}()

// Cookie names: the session's (path /dashboard) and the device cookie of sign-in throttling
// (auth.NewDeviceCookie), sent only to the sign-in form.
const (
	sessionCookie = "kassa_dashboard"
	deviceCookie  = "kassa_dashboard_device"
	signInPath    = "/dashboard/sign-in"
	settingsPath  = "/dashboard/settings/ecommerce"
)

// scripted are the pages with a script of their own, which their CSP allows by the response's nonce;
// the others allow none. Every page works without it.
var scripted = map[string]bool{"settings": true, "transactions": true, "cardframe": true, "webhook": true, "invoice": true,
	"invoice-form": true}

// framed are the pages that frame Kassa's own hosted card form (hosted-page sessions the dashboard
// creates), which their CSP allows by frame-src 'self'; the others may frame nothing.
var framed = map[string]bool{"cardframe": true}

// Who may do what: every action respects the staff roles (reporting is read-only; sales has its own
// transactions and the terminal).
var (
	everyone = user.Roles
	// managers manage staff: owners everyone, admins everyone but owners (user.MayManage). They are
	// also who moves money after the fact (capture, refund, void) and changes customers, plans and
	// subscriptions.
	managers = []user.Role{user.Owner, user.Admin}
	// readers see the merchant's business: the overview, every transaction, customers, billing and
	// the payments API's objects. Reporting is read-only.
	readers = []user.Role{user.Owner, user.Admin, user.Reporting}
	// sellers take payments at the virtual terminal; sales staff see their own transactions only
	// (payment.Filter.ClientID = clientOf(user)).
	sellers = []user.Role{user.Owner, user.Admin, user.Sales}
	// listers see the transactions list: readers all of them, sales their own.
	listers = user.Roles
)

// isManager reports whether role is one of managers: whether it may change what the business pages
// show (customers and their cards, plans, subscriptions, invoices, webhooks), and so which of a
// page's actions it is offered.
func isManager(role user.Role) bool { return slices.Contains(managers, role) }

// section is one part of the dashboard in the navigation, in its group ("" for one on its own).
type section struct {
	Group, Name, Path, About string
	Roles                    []user.Role
}

// sections are the parts of the dashboard, in the navigation's order and grouped as a merchant looks
// for them: money taken (Payments), the people paying and what bills them (Customers), what a
// merchant's developers connect (Developers), and the business's own set-up (Settings). Each shows
// to the roles that may open it, and a group to the roles that may open one of its sections.
var sections = []section{
	{"", "Home", "/dashboard", "who you are signed in as", everyone},
	{"Payments", "Transactions", transactionsPath, "find payments, refund, capture or void them, export them", listers},
	{"Payments", "Terminal", terminalPath, "take a payment by telephone or mail", sellers},
	{"Customers", "Customers", customersPath, "customers and their stored cards", readers},
	{"Customers", "Billing", "/dashboard/subscriptions", "subscriptions and the plans they bill", readers},
	{"Customers", "Invoices", invoicesPath, "invoices e-mailed to customers with a link to pay them", readers},
	{"Developers", "Payments API", "/dashboard/payments/intents", "payment intents and hosted-page sessions of the payments API", readers},
	{"Developers", "Webhooks", webhooksPath, "the endpoints Kassa sends events to, and their deliveries", readers},
	{"Developers", "Events", eventsPath, "the events Kassa recorded, as the events API serves them, with their payloads", readers},
	{"Developers", "Activity", "/dashboard/activity", "who did what, when, from where: staff and API clients", everyone},
	{"Settings", "eCommerce", settingsPath, "the processor, client credentials, payments API keys and connected partners", managers},
	{"Settings", "Staff", "/dashboard/staff", "invite staff, change their roles, remove them", managers},
	{"Settings", "Account", accountPath, "your password, two-factor authentication and sessions", everyone},
}

// Config configures a Handler.
type Config struct {
	Auth      *auth.Service
	DB        *store.DB
	Sessions  *user.Sessions
	TwoFactor *user.TwoFactor
	CardKeys  CardKeys
	// Processors says which processor a merchant's payments go to, for the settings page.
	Processors interface {
		ForMerchant(ctx context.Context, merchantID string) (processor.Account, error)
	}
	Merchants *merchant.Cache
	// The services whose objects the dashboard shows and changes.
	Ledger      *payment.Ledger
	Vault       *vault.Service
	Checkout    *checkout.Service
	HostedPages *hostedpage.Service
	Plans       *plan.Service
	Billing     *billing.Engine
	// Webhooks are the merchants' webhook endpoints and their delivery logs.
	Webhooks *webhook.Endpoints
	// Invoices is the invoice service, and Idempotency the records under which the invoice forms
	// act once per form (Store.Once), as its API's requests do per Idempotency-Key.
	Invoices    *invoice.Service
	Idempotency *idempotency.Store
	// PublicURL is the base of the links in e-mails; with https, cookies are Secure.
	PublicURL string
	// Proxies name the client behind a reverse proxy, for sign-in throttling and the sessions' record.
	Proxies httpapi.Proxies
	Now     func() time.Time
}

// Handler serves the dashboard.
type Handler struct {
	cfg    Config
	secure bool
	csrf   *http.CrossOriginProtection
}

// New returns a Handler.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, secure: strings.HasPrefix(strings.ToLower(cfg.PublicURL), "https://"), csrf: http.NewCrossOriginProtection()}
	h.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, http.StatusForbidden, "message", view{Title: "Request refused", Error: "This form was sent from another site, so it was refused."})
	}))
	return h
}

// Routes registers the dashboard, and GET / for browsers. Under /dashboard no error is the API's
// JSON: an unknown path is the dashboard's 404 page (notFound), a path asked with a method it does
// not take its 405 page (notAllowed), and a panic its 500 page (crashed).
func (h *Handler) Routes(r *httpapi.Router) {
	r.Pages("/dashboard", http.HandlerFunc(h.notFound), http.HandlerFunc(h.notAllowed), h.crashed)
	r.HandleFunc("GET", "/{$}", h.root)
	r.HandleFunc("GET", signInPath, h.signInPage)
	r.Handle("POST", signInPath, h.csrf.Handler(http.HandlerFunc(h.signIn)))
	r.HandleFunc("GET", "/dashboard/forgot", h.forgotPage)
	r.Handle("POST", "/dashboard/forgot", h.csrf.Handler(http.HandlerFunc(h.forgot)))
	r.HandleFunc("GET", "/dashboard/password", h.passwordPage)
	r.Handle("POST", "/dashboard/password", h.csrf.Handler(http.HandlerFunc(h.setPassword)))

	r.Handle("GET", "/dashboard", h.requireRole(everyone, h.home))
	r.Handle("POST", "/dashboard/sign-out", h.requireRole(everyone, h.signOut))
	r.Handle("POST", "/dashboard/switch", h.requireRole(everyone, h.switchMerchant))
	r.Handle("GET", "/dashboard/staff", h.requireRole(managers, h.staff))
	r.Handle("POST", "/dashboard/staff/invite", h.requireRole(managers, h.invite))
	r.Handle("POST", "/dashboard/staff/{id}/role", h.requireRole(managers, h.setRole))
	r.Handle("POST", "/dashboard/staff/{id}/remove", h.requireRole(managers, h.remove))
	r.Handle("POST", "/dashboard/staff/two-factor", h.requireRole(managers, h.requireTwoFactor))

	r.HandleFunc("GET", codePath, h.codePage)
	r.Handle("POST", codePath, h.csrf.Handler(http.HandlerFunc(h.code)))
	r.HandleFunc("GET", enrolPath, h.enrolPage)
	r.Handle("POST", enrolPath, h.csrf.Handler(http.HandlerFunc(h.enrol)))
	r.Handle("GET", "/dashboard/activity", h.requireRole(everyone, h.activity))
	r.Handle("GET", "/dashboard/activity/export.csv", h.requireRole(everyone, h.exportActivity))
	r.Handle("GET", settingsPath, h.requireRole(managers, h.settings))
	r.Handle("POST", settingsPath+"/clients", h.requireRole(managers, h.createClient))
	r.Handle("POST", settingsPath+"/clients/{id}/revoke", h.requireRole(managers, h.revokeClient))
	r.Handle("POST", settingsPath+"/partners/{id}/revoke", h.requireRole(managers, h.revokePartner))
	r.Handle("POST", settingsPath+"/card-key/rotate", h.requireRole(managers, h.rotateKey))
	r.Handle("POST", settingsPath+"/api-keys", h.requireRole(managers, h.createAPIKey))
	r.Handle("POST", settingsPath+"/api-keys/{id}/revoke", h.requireRole(managers, h.revokeAPIKey))
	r.Handle("POST", settingsPath+"/origins", h.requireRole(managers, h.setOrigins))
	r.Handle("POST", settingsPath+"/branding", h.requireRole(managers, h.setBranding))
	r.Handle("POST", settingsPath+"/region", h.requireRole(managers, h.setRegion))
	r.Handle("GET", accountPath, h.requireRole(everyone, h.account))
	r.Handle("GET", setupPath, h.requireRole(everyone, h.setupPage))
	r.Handle("POST", setupPath, h.requireRole(everyone, h.setup))
	r.Handle("POST", "/dashboard/account/two-factor/recovery-codes", h.requireRole(everyone, h.recoveryCodes))
	r.Handle("POST", "/dashboard/account/two-factor/disable", h.requireRole(everyone, h.disable))
	r.Handle("POST", "/dashboard/account/password", h.requireRole(everyone, h.changePassword))
	r.Handle("POST", "/dashboard/account/sessions/{handle}/end", h.requireRole(everyone, h.endSession))
	h.transactionRoutes(r)
	h.customerRoutes(r)
	h.billingRoutes(r)
	h.paymentsRoutes(r)
	h.terminalRoutes(r)
	h.webhookRoutes(r)
	h.eventRoutes(r)
	h.invoiceRoutes(r)
	h.emailRoutes(r)
	r.Handle("GET", searchPath, h.requireRole(everyone, h.searchPage))
}

// root sends a browser that opens Kassa's address to the dashboard; an API client keeps the JSON 404
// of an unknown route: GET / asking for text/html (a browser) is redirected to /dashboard.
func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	httpapi.WriteError(w, r, fault.NotFound("no route for %s %s", r.Method, r.URL.Path))
}

type sessionKey struct{}

// signedIn is the session of a request that passed requireRole.
func signedIn(r *http.Request) user.Session {
	s, _ := r.Context().Value(sessionKey{}).(user.Session)
	return s
}

// requireRole lets a request through to next only with a session of one of roles: without one, a
// browser is sent to sign in; with another role, 403. A POST must also carry the session's
// csrf_token (besides passing http.CrossOriginProtection).
func (h *Handler) requireRole(roles []user.Role, next http.HandlerFunc) http.Handler {
	return h.csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := h.session(w, r)
		if !ok {
			return
		}
		if !slices.Contains(roles, sess.Role) {
			h.render(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)), http.StatusForbidden, "message",
				view{Title: "Not allowed", Error: "Your role (" + sess.Role.Label() + ") does not allow this."})
			return
		}
		if r.Method == http.MethodPost && r.PostFormValue("csrf_token") != sess.CSRF {
			h.render(w, r, http.StatusForbidden, "message", view{Title: "Request refused", Error: "This form has expired or was not sent from this page."})
			return
		}
		// What the request changes is recorded as the user's, from its address.
		next(w, r.WithContext(h.actor(context.WithValue(r.Context(), sessionKey{}, sess), r, sess.UserID)))
	}))
}

// session opens the request's session; without one it sends the browser to sign in and reports false.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (user.Session, bool) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		sess, ok, err := h.cfg.Sessions.Open(r.Context(), c.Value)
		if err != nil {
			h.fail(w, r, err)
			return user.Session{}, false
		}
		if ok {
			return sess, true
		}
		h.clearSession(w)
	}
	http.Redirect(w, r, signInPath, http.StatusSeeOther)
	return user.Session{}, false
}

// view is what a page shows.
type view struct {
	Title, Nonce  string
	Session       *user.Session
	Merchant      string
	Lang          language.Tag // the merchant's locale, which amounts are shown in (template func amount)
	Nav           []navGroup
	Switch        []switchItem // the merchants the signed-in person may switch to, when more than one
	Error, Notice string
	Field         string // the form field Error is about, marked invalid on the form ("" for none)
	Email, Token  string
	Invite, Sent  bool
	Staff         []staffRow
	Grantable     []user.Role
	InviteRole    user.Role            // the Staff page's invitation role, chosen unless changed
	Enrolment     *user.Enrolment      // a secret offered for two-factor authentication
	Action        string               // where the enrolment form posts
	Codes         []string             // recovery codes, shown once
	TwoFactor     user.Status          // the signed-in user's second factor
	Required      bool                 // the merchant requires a second factor of all staff
	Sessions      []user.ActiveSession // the signed-in user's sessions
	Settings      *settingsView        // the eCommerce settings page
	NewClient     *auth.Credentials    // a client pair just made, its secret shown once
	NewKey        *checkout.NewKey     // a payments-API key just made, shown once
	Activity      *activityFilter      // the Activity page's filter
	Rows          []activityRow        // the Activity page's records
	// Search is the query the header's search box shows: the one the page answers.
	Search string
	// Wide: the page's main column is wide (tables of many columns).
	Wide bool
	// TestData: what the page shows is test data whatever the merchant's processor (the overview's
	// test view, a test transaction). render adds the merchant's own: see testBanner.
	TestData bool
	// Test is the banner of a page whose data is test data, set by render; nil for others.
	Test *testBanner
	// Data is what a page shows when no field above holds it, its own type per page.
	Data any
}

// testBanner is what the banner of a page of test data says. Every page of a merchant whose new
// payments go to a test account (the simulator, a sandbox) carries it, and so does a page that shows
// test data of a live merchant (TestData).
type testBanner struct {
	// Account: the merchant's new payments go to a test account, so every payment it takes moves no
	// money; false when only the page's data is test data.
	Account bool
	// Connect is where the signed-in user sees and changes the merchant's processor (Settings, for
	// the roles that may open it); "" for the others, told who can.
	Connect string
}

// testBannerFor is the banner of a page showing test data (testData) to sess, or nil when its data
// is live. The merchant's account is read as payments read it (payment.Ledger.Test): an account that
// is not available on this node counts as live, so a live merchant is never told it is in test mode.
func (h *Handler) testBannerFor(ctx context.Context, sess user.Session, testData bool) *testBanner {
	account := h.cfg.Ledger.Test(ctx, sess.MerchantID, "")
	if !account && !testData {
		return nil
	}
	b := &testBanner{Account: account}
	if account && slices.Contains(managers, sess.Role) {
		b.Connect = settingsPath + "#processor"
	}
	return b
}

// navGroup is a group of the navigation with the sections of it the user's role may open; Name is
// "" for a section on its own.
type navGroup struct {
	Name  string
	Items []navItem
}

type navItem struct {
	section
	Current bool
}

// navFor is the navigation of role on the page at path: the sections it may open, in their groups.
func navFor(role user.Role, path string) []navGroup {
	var out []navGroup
	for _, s := range sections {
		if !slices.Contains(s.Roles, role) {
			continue
		}
		if n := len(out); n == 0 || s.Group == "" || out[n-1].Name != s.Group {
			out = append(out, navGroup{Name: s.Group})
		}
		g := &out[len(out)-1]
		g.Items = append(g.Items, navItem{section: s, Current: s.Path == path})
	}
	return out
}

// switchItem is a merchant of the header's switcher.
type switchItem struct {
	ID, Name string
	Current  bool
}

// render writes a page with the layout, and for a signed-in request the header: the merchant's
// name, the sections the user's role may open, and sign-out.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	if sess := signedIn(r); sess.UserID != "" {
		v.Session = &sess
		m, err := h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
		if err != nil {
			httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard: read the merchant", "err", err)
		}
		v.Merchant, v.Lang = m.Name, m.Language()
		if len(sess.Merchants) > 1 {
			for _, id := range sess.Merchants {
				other, err := h.cfg.Merchants.Get(r.Context(), id)
				if err != nil {
					httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard: read a merchant of the switcher", "err", err)
					continue
				}
				v.Switch = append(v.Switch, switchItem{ID: id, Name: other.Name, Current: id == sess.MerchantID})
			}
		}
		v.Test = h.testBannerFor(r.Context(), sess, v.TestData)
		v.Nav = navFor(sess.Role, r.URL.Path)
	}
	v.Nonce = rand.Text()
	csp := "default-src 'none'; style-src 'nonce-" + v.Nonce + "'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	if scripted[page] {
		// A page's script may fetch from Kassa (the transactions export's progress).
		csp += "; script-src 'nonce-" + v.Nonce + "'; connect-src 'self'"
	}
	if framed[page] {
		csp += "; frame-src 'self'"
	}
	if page == "settings" {
		csp += "; img-src 'self'" // the merchant's logo, served by Kassa (Settings → Branding)
	}
	httpapi.SetPageHeaders(w.Header(), csp)
	w.WriteHeader(status)
	if err := pages[page].ExecuteTemplate(w, "page", v); err != nil {
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard: render "+page, "err", err)
	}
}

// fail logs an internal error and shows the 500 page: the request's id, which finds the error in the
// log, never the error itself.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard", "err", err)
	h.render(w, r, http.StatusInternalServerError, "failed", view{Title: "Something went wrong", Data: httpapi.RequestID(r.Context())})
}

// notFoundOr answers a refusal of a service: not found (another merchant's object, or none) as the
// 404 page, any other status as a page titled title that says msg.
func (h *Handler) notFoundOr(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	if status == http.StatusNotFound {
		h.notFound(w, r)
		return
	}
	h.render(w, r, status, "message", view{Title: title, Error: msg})
}

// crashed answers a page's panic as fail does an error, with the stack in the log.
func (h *Handler) crashed(w http.ResponseWriter, r *http.Request, recovered any) {
	h.fail(w, r, fmt.Errorf("panic: %v\n%s", recovered, debug.Stack()))
}

// notFound is the 404 page of every path and object the dashboard does not have. An object of
// another merchant is answered by the same page, so that it cannot be told from a missing one. A
// signed-in user sees the navigation, as on every page; a signed-out visitor sees the page alone.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.render(w, h.withSession(r), http.StatusNotFound, "notfound", view{Title: "Page not found"})
}

// notAllowed is the 405 page of a dashboard path asked with a method it does not take (a link to an
// action, which only a form posts; a form posted to a page that is only read), the router's Allow
// header kept. It shows the navigation as notFound does.
func (h *Handler) notAllowed(w http.ResponseWriter, r *http.Request) {
	h.render(w, h.withSession(r), http.StatusMethodNotAllowed, "notallowed", view{Title: "Not available this way", Data: r.Method})
}

// withSession is r with its session, if its cookie opens one, for an error page that no route's
// requireRole opened it for: the page then shows the navigation. It never refuses nor redirects.
func (h *Handler) withSession(r *http.Request) *http.Request {
	if signedIn(r).UserID != "" {
		return r
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return r
	}
	sess, ok, err := h.cfg.Sessions.Open(r.Context(), c.Value)
	if err != nil {
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), "dashboard: open the session of an error page", "err", err)
	}
	if !ok {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess))
}

func (h *Handler) setCookie(w http.ResponseWriter, name, value, path string, expires time.Time, same http.SameSite) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, Expires: expires, MaxAge: maxAge(value), HttpOnly: true,
		Secure: h.secure, SameSite: same})
}

// maxAge deletes a cookie set to "".
func maxAge(value string) int {
	if value == "" {
		return -1
	}
	return 0
}

func (h *Handler) clearSession(w http.ResponseWriter) {
	h.setCookie(w, sessionCookie, "", "/dashboard", time.Time{}, http.SameSiteLaxMode)
}

// home is the overview for those who see the merchant's business (readers), and for sales staff a
// short page of links to what they may use.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	if slices.Contains(readers, signedIn(r).Role) {
		h.overview(w, r)
		return
	}
	h.render(w, r, http.StatusOK, "home", view{Title: "Home"})
}

// signInPage serves the sign-in form; a signed-in browser goes to the dashboard.
func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if _, ok, _ := h.cfg.Sessions.Open(r.Context(), c.Value); ok {
			http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
			return
		}
	}
	v := view{Title: "Sign in"}
	switch {
	case r.URL.Query().Get("password") == "set":
		v.Notice = "Your password is set. Sign in with it."
	case r.URL.Query().Get("joined") != "":
		v.Notice = "You have accepted the invitation. Sign in to open the merchant's dashboard."
	}
	h.render(w, r, http.StatusOK, "signin", v)
}

// signIn checks e-mail and password through the throttled path of the authorization pages
// (auth.SignIn: the sign-in throttle's buckets and the password gate), with every role allowed, and
// starts a session: HttpOnly, SameSite=Lax, Secure over https.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	addr := h.cfg.Proxies.ClientAddr(r)
	attempt := auth.Attempt{Email: email, Password: r.PostFormValue("password"), Addr: addr}
	if c, err := r.Cookie(deviceCookie); err == nil {
		attempt.Device = c.Value
	}
	acct, err := h.cfg.Auth.SignIn(r.Context(), attempt)
	if status, msg, refused := auth.Refusal(w.Header(), err, h.cfg.Now()); refused {
		h.render(w, r, status, "signin", view{Title: "Sign in", Email: email, Error: msg})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	var p user.Person
	err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		p, err = user.GetPerson(r.Context(), q, acct.UserID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The password was right: the device cookie counts this browser's next sign-ins apart from
	// strangers', whatever the second factor does.
	device, expires := h.cfg.Auth.NewDeviceCookie(p.ID)
	h.setCookie(w, deviceCookie, device, signInPath, expires, http.SameSiteStrictMode)
	if next, err := h.secondStep(w, r, p); next || err != nil {
		if err != nil {
			h.fail(w, r, err)
		}
		return
	}
	h.startHome(w, r, p)
}

// startHome starts a session for person p, whose sign-in is complete, at the merchant it signs in to
// (user.Home: the one it last chose or joined), and sends the browser to the dashboard.
func (h *Handler) startHome(w http.ResponseWriter, r *http.Request, p user.Person) {
	u, err := h.homeOf(r, p)
	if h.answerRefusal(w, r, err, func(status int, msg string) {
		h.render(w, r, status, "signin", view{Title: "Sign in", Email: p.Email, Error: msg})
	}) {
		return
	}
	if h.startSession(w, r, u) {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
	}
}

// startSession starts a session for u, records the sign-in in the audit log, and sets the session's
// cookie: HttpOnly, SameSite=Lax, Secure over https. It reports false when it could not, having shown
// why.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, u user.User) bool {
	addr := h.cfg.Proxies.ClientAddr(r).String()
	cookie, sess, err := h.cfg.Sessions.Start(r.Context(), u, addr, r.UserAgent())
	if err == nil {
		err = h.recordAlone(h.actor(r.Context(), r, u.ID), u.MerchantID, "session.start")
	}
	if err != nil {
		h.fail(w, r, err)
		return false
	}
	h.setCookie(w, sessionCookie, cookie, "/dashboard", sess.CreatedAt.Add(user.AbsoluteTimeout), http.SameSiteLaxMode)
	return true
}

// switchMerchant moves the session to another merchant whose staff the person is, which becomes the
// one it signs in to next; the session keeps its age and its second factor.
func (h *Handler) switchMerchant(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		u, err := user.Choose(r.Context(), tx, r.PostFormValue("merchant_id"), sess.UserID)
		if err != nil {
			return err
		}
		if err := h.cfg.Sessions.Switch(r.Context(), tx, mustCookie(r), u); err != nil {
			return err
		}
		return record(r.Context(), tx, u.MerchantID, "session.switch", "", "", h.cfg.Now())
	})
	switch {
	case errors.Is(err, user.ErrNotFound):
		h.render(w, r, http.StatusNotFound, "message", view{Title: "Not found", Error: "You are not on that merchant's staff."})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.cfg.Sessions.Forget(sess.UserID)
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// signOut ends the session, on this node at once and on the others within the session poll.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Cookie(sessionCookie) // requireRole opened it
	err := h.cfg.Sessions.End(r.Context(), c.Value)
	if err == nil {
		err = h.recordAlone(r.Context(), signedIn(r).MerchantID, "session.end")
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.clearSession(w)
	http.Redirect(w, r, signInPath, http.StatusSeeOther)
}

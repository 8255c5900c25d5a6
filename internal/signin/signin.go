// Package signin serves the pages of the authorization-code flow (gateway-api.md, "Authentication"
// rule 3; RFC 6749 §4.1): GET /oauth/authorize checks the partner's request, asks a merchant who is
// not signed in for e-mail and password, then shows the consent page with the partner's business
// name and square image, the scopes asked, and two buttons. Approve sends the browser back to the
// partner's registered callback with a code and the state; deny, with error=access_denied.
//
// A user with a second factor gives its code (or a recovery code) after the password, before the
// consent page, as on the dashboard: the step between is a sealed cookie that allows only that step
// (user.TwoFactor.Pending), and the code is checked by user.TwoFactor.Check, with the dashboard's
// throttle and single use. A user whose merchant requires a second factor and who has none is sent to
// the dashboard to set it up: this page does not enrol.
//
// The pages are rendered on the server and work without JavaScript. Every response carries a strict
// Content-Security-Policy (no script at all, frame-ancestors 'none'); the forms are protected from
// cross-site posting twice over, by http.CrossOriginProtection and by a token bound to the session;
// the session cookie is HttpOnly, SameSite=Lax, and Secure when Kassa is served over https. A
// successful sign-in also leaves a device cookie (HttpOnly, SameSite=Strict), with which the next
// sign-in from that browser is counted apart from strangers' attempts (auth.SignIn).
package signin

import (
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/origin"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

//go:embed *.html
var files embed.FS

// pages are the templates, one set per page, each with the shared layout.
var pages = map[string]*template.Template{
	"signin":  template.Must(template.ParseFS(files, "page.html", "signin.html")),
	"consent": template.Must(template.ParseFS(files, "page.html", "consent.html")),
	"code":    template.Must(template.ParseFS(files, "page.html", "code.html")),
	"error":   template.Must(template.ParseFS(files, "page.html", "error.html")),
}

// cookieName is the session cookie's name, deviceCookie the device cookie's (auth.NewDeviceCookie);
// their path keeps them to the authorization pages.
const (
	cookieName    = "kassa_signin"
	deviceCookie  = "kassa_device"
	pendingCookie = "kassa_signin_2fa"
	cookiePath    = "/oauth/authorize"
)

// Config configures a Handler.
type Config struct {
	Auth *auth.Service
	DB   *store.DB
	// TwoFactor checks the second factor of the users who have one.
	TwoFactor *user.TwoFactor
	// SecureCookies marks the session cookie Secure: set it when Kassa is served over https.
	SecureCookies bool
	// Proxies name the client behind a reverse proxy, for throttling sign-in per client address.
	Proxies httpapi.Proxies
	Now     func() time.Time
}

// Handler serves the authorization pages.
type Handler struct {
	auth    *auth.Service
	db      *store.DB
	factors *user.TwoFactor
	secure  bool
	proxies httpapi.Proxies
	now     func() time.Time
	csrf    *http.CrossOriginProtection
}

// New returns a Handler.
func New(cfg Config) *Handler {
	h := &Handler{auth: cfg.Auth, db: cfg.DB, factors: cfg.TwoFactor, secure: cfg.SecureCookies, proxies: cfg.Proxies, now: cfg.Now, csrf: http.NewCrossOriginProtection()}
	if h.now == nil {
		h.now = time.Now
	}
	h.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.render(w, r, http.StatusForbidden, "error", view{Title: "Request refused", Error: "This form was sent from another site, so it was refused."})
	}))
	return h
}

// Routes registers the pages.
func (h *Handler) Routes(r *httpapi.Router) {
	r.HandleFunc("GET", "/oauth/authorize", h.authorize)
	r.Handle("POST", "/oauth/authorize/sign-in", h.csrf.Handler(http.HandlerFunc(h.signIn)))
	r.Handle("POST", "/oauth/authorize/code", h.csrf.Handler(http.HandlerFunc(h.code)))
	r.Handle("POST", "/oauth/authorize/decision", h.csrf.Handler(http.HandlerFunc(h.decide)))
}

// view is what a page shows.
type view struct {
	Title   string
	Nonce   string
	Error   string
	Request string // the authorization request's query string, carried through the forms
	Email   string
	Partner auth.Partner
	// Merchants are those the signed-in user may approve the partner for.
	Merchants []user.Membership
	Scopes    []scopeView
	CSRF      string
}

type scopeView struct{ Name, Description string }

// scopeDescriptions say what each scope lets a partner do, in the merchant's words, and no more than
// it does: the consent page describes each requested scope truthfully.
var scopeDescriptions = map[string]string{
	"ecom": "take card payments for you, and read, capture and refund your transactions, customers, cards, plans and " +
		"subscriptions, through the gateway API and the payments API (payment intents and the hosted payment page)",
	"invoice": "create, send, read, change, cancel and delete your invoices, through the gateway API's invoice service: " +
		"it e-mails your customers invoices with a link to pay them, and reads the name, e-mail and address of the " +
		"customers of yours that an invoice names",
}

// authorize serves GET /oauth/authorize.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) {
	req, ok := h.request(w, r, r.URL.Query())
	if !ok {
		return
	}
	sess, signedIn := h.session(r)
	if !signedIn {
		h.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Request: r.URL.RawQuery, Partner: req.Partner})
		return
	}
	h.consent(w, r, req, sess, r.URL.RawQuery)
}

// request parses the authorization request. A bad client or redirect URI gets an error page and is
// never redirected (RFC 6749 §4.1.2.1); any other fault is sent back to the redirect URI. It reports
// false when it has answered.
func (h *Handler) request(w http.ResponseWriter, r *http.Request, q url.Values) (auth.AuthorizationRequest, bool) {
	req, err := h.auth.ParseAuthorizationRequest(r.Context(), q)
	var ce *auth.ClientError
	var re *auth.RedirectError
	switch {
	case errors.As(err, &ce):
		h.render(w, r, http.StatusBadRequest, "error", view{Title: "Unknown application", Error: ce.Reason})
		return req, false
	case errors.As(err, &re):
		redirect(w, req.RedirectURI, url.Values{"error": {re.Code}, "error_description": {re.Description}}, req.State)
		return req, false
	case err != nil:
		h.fail(w, r, err)
		return req, false
	}
	return req, true
}

// formRequest reads the authorization request a form carries in its "request" field, and checks it
// again: a form is no more trusted than the URL it came from. It reports false when it has answered.
func (h *Handler) formRequest(w http.ResponseWriter, r *http.Request) (string, auth.AuthorizationRequest, bool) {
	rawReq := r.PostFormValue("request")
	q, err := url.ParseQuery(rawReq)
	if err != nil {
		h.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad request", Error: "The form was damaged; start again from the application."})
		return "", auth.AuthorizationRequest{}, false
	}
	req, ok := h.request(w, r, q)
	return rawReq, req, ok
}

// signIn serves the sign-in form's POST: on success it starts a session and sends the browser back to
// the authorization request, now to the consent page.
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	rawReq, req, ok := h.formRequest(w, r)
	if !ok {
		return
	}
	email := strings.TrimSpace(r.PostFormValue("email"))
	v := view{Title: "Sign in", Request: rawReq, Partner: req.Partner, Email: email}
	// Only an owner or an admin approves partners for the merchant (docs/design/auth.md, "Staff: people,
	// memberships and roles"); anyone else's password fails here as a wrong one would.
	attempt := auth.Attempt{Email: email, Password: r.PostFormValue("password"), Addr: h.proxies.ClientAddr(r), Roles: user.Approvers}
	if c, err := r.Cookie(deviceCookie); err == nil {
		attempt.Device = c.Value
	}
	acct, err := h.auth.SignIn(r.Context(), attempt)
	if status, msg, refused := auth.Refusal(w.Header(), err, h.now()); refused {
		v.Error = msg
		h.render(w, r, status, "signin", v)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The password was right: the device cookie counts this browser's next sign-ins apart from
	// strangers', whatever the second factor does. It is sent only with this site's own forms
	// (SameSite=Strict): it serves nothing but the next sign-in from this browser.
	device, expires := h.auth.NewDeviceCookie(acct.UserID)
	h.setCookie(w, deviceCookie, device, expires, http.SameSiteStrictMode)
	step, err := h.auth.SecondStep(r.Context(), acct.UserID)
	switch {
	case err != nil:
		h.fail(w, r, err)
	case step == user.StepCode:
		now := h.now()
		h.setCookie(w, pendingCookie, h.factors.Pending(acct.UserID, user.StepCode, now), now.Add(user.PendingTTL), http.SameSiteStrictMode)
		h.render(w, r, http.StatusOK, "code", view{Title: "Two-factor authentication", Request: rawReq, Partner: req.Partner})
	case step == user.StepEnrol:
		v.Error = "Your merchant requires two-factor authentication, which you have not set up yet. Sign in to the Kassa dashboard " +
			"to set it up, then come back to this page."
		h.render(w, r, http.StatusForbidden, "signin", v)
	default:
		h.startSession(w, r, acct.UserID, rawReq)
	}
}

// code serves the second factor's form: with the code of the user whose password was right (the
// pending cookie), it starts the session and sends the browser on to the consent page.
func (h *Handler) code(w http.ResponseWriter, r *http.Request) {
	rawReq, req, ok := h.formRequest(w, r)
	if !ok {
		return
	}
	var id string
	var merchants []user.Membership
	var err error
	if c, cerr := r.Cookie(pendingCookie); cerr == nil {
		if pending, ok := h.factors.OpenPending(c.Value, user.StepCode, h.now()); ok {
			id = pending
			merchants, err = h.approverOf(r, id)
		}
	}
	switch {
	case err != nil:
		h.fail(w, r, err)
		return
	case len(merchants) == 0:
		h.setCookie(w, pendingCookie, "", time.Time{}, http.SameSiteStrictMode)
		h.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Request: rawReq, Partner: req.Partner,
			Error: "Your sign-in has expired. Sign in again."})
		return
	}
	_, err = h.factors.Check(r.Context(), id, r.PostFormValue("code"), h.now())
	var f *fault.Error
	switch {
	case errors.As(err, &f):
		if f.Status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(user.CodeLockout/time.Second)))
		}
		h.render(w, r, f.Status, "code", view{Title: "Two-factor authentication", Request: rawReq, Partner: req.Partner,
			Error: fault.Sentence(f.Message)})
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.setCookie(w, pendingCookie, "", time.Time{}, http.SameSiteStrictMode)
	h.startSession(w, r, id, rawReq)
}

// approverOf reads the merchants for which person id may approve a partner: those whose staff it is,
// accepted, as an owner or an admin (user.Approvers).
func (h *Handler) approverOf(r *http.Request, id string) ([]user.Membership, error) {
	var all []user.Membership
	err := h.db.Read(r.Context(), func(q store.Querier) error {
		var err error
		all, err = user.Memberships(r.Context(), q, id)
		return err
	})
	return slices.DeleteFunc(all, func(m user.Membership) bool { return !slices.Contains(user.Approvers, m.Role) }), err
}

// startSession starts the authorization pages' session for the staff user and sends the browser back
// to the authorization request, now to the consent page.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, userID, rawReq string) {
	value, sess := h.auth.NewSession(userID)
	h.setCookie(w, cookieName, value, sess.ExpiresAt, http.SameSiteLaxMode)
	http.Redirect(w, r, "/oauth/authorize?"+rawReq, http.StatusSeeOther)
}

// setCookie sets a cookie of the authorization pages: HttpOnly, kept to their path, Secure over https;
// "" deletes it.
func (h *Handler) setCookie(w http.ResponseWriter, name, value string, expires time.Time, same http.SameSite) {
	c := &http.Cookie{Name: name, Value: value, Path: cookiePath, Expires: expires, HttpOnly: true, Secure: h.secure, SameSite: same}
	if value == "" {
		c.Expires, c.MaxAge = time.Time{}, -1
	}
	http.SetCookie(w, c)
}

// consent shows the consent page to a signed-in staff user: the partner, what it asks for, and the
// merchant it would act for, chosen among those the user may approve partners for when there are
// several.
func (h *Handler) consent(w http.ResponseWriter, r *http.Request, req auth.AuthorizationRequest, sess auth.Session, rawReq string) {
	merchants, err := h.approverOf(r, sess.UserID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(merchants) == 0 { // removed from the staff, or demoted, since signing in
		h.clearSession(w)
		h.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Request: rawReq, Partner: req.Partner})
		return
	}
	v := view{Title: "Allow access", Request: rawReq, Partner: req.Partner, Email: merchants[0].Email, Merchants: merchants, CSRF: sess.CSRFToken()}
	for _, name := range strings.Fields(req.Scopes.String()) {
		v.Scopes = append(v.Scopes, scopeView{Name: name, Description: scopeDescriptions[name]})
	}
	// The decision's redirect goes to the partner's callback: form-action must allow its origin, as
	// browsers apply form-action to the redirects that follow a form's submission.
	h.renderWith(w, r, http.StatusOK, "consent", v, originOf(req.RedirectURI), originOf(req.Partner.ImageURL))
}

// decide serves the consent form's POST. Approving acts for the merchant chosen on the page
// (merchant_id, which may be left out when the user approves for one merchant only), which must be
// one the user may approve partners for.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	rawReq, req, ok := h.formRequest(w, r)
	if !ok {
		return
	}
	sess, signedIn := h.session(r)
	if !signedIn {
		h.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Request: rawReq, Partner: req.Partner,
			Error: "Your sign-in has expired. Sign in again."})
		return
	}
	if r.PostFormValue("csrf_token") != sess.CSRFToken() {
		h.render(w, r, http.StatusForbidden, "error", view{Title: "Request refused", Error: "This form has expired or was not sent from this page."})
		return
	}
	switch r.PostFormValue("decision") {
	case "approve":
		merchants, err := h.approverOf(r, sess.UserID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		chosen := r.PostFormValue("merchant_id")
		if chosen == "" && len(merchants) == 1 {
			chosen = merchants[0].MerchantID
		}
		if !slices.ContainsFunc(merchants, func(m user.Membership) bool { return m.MerchantID == chosen }) {
			h.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad request",
				Error: "Choose one of the merchants you may connect partners for."})
			return
		}
		code, err := h.auth.Authorize(r.Context(), chosen, req)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		redirect(w, req.RedirectURI, url.Values{"code": {code}}, req.State)
	case "deny":
		// RFC 6749 §4.1.2.1: "access_denied: The resource owner or authorization server denied the request."
		redirect(w, req.RedirectURI, url.Values{"error": {"access_denied"}}, req.State)
	default:
		h.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad request", Error: "Choose Allow access or Deny."})
	}
}

// redirect sends the browser to the client's redirect URI with params and the state, keeping the
// URI's own query (RFC 6749 §3.1.2: "MUST retain the query component").
func redirect(w http.ResponseWriter, redirectURI string, params url.Values, state string) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		http.Error(w, "bad redirect URI", http.StatusInternalServerError) // registered URIs are validated
		return
	}
	q := u.Query()
	for k, vs := range params {
		q[k] = vs
	}
	if state != "" {
		q.Set("state", state)
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Location", u.String())
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusSeeOther)
}

func (h *Handler) session(r *http.Request) (auth.Session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return auth.Session{}, false
	}
	return h.auth.OpenSession(c.Value)
}

func (h *Handler) clearSession(w http.ResponseWriter) {
	h.setCookie(w, cookieName, "", time.Time{}, http.SameSiteLaxMode)
}

// fail logs an internal error and shows a page that says so.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Logger(r.Context()).ErrorContext(r.Context(), "authorization page", "err", err)
	h.render(w, r, http.StatusInternalServerError, "error", view{Title: "Something went wrong", Error: "Kassa could not complete this request. Try again in a moment."})
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	h.renderWith(w, r, status, page, v)
}

// renderWith renders a page with a strict Content-Security-Policy: no script, styles only by this
// response's nonce, images only from the origins given, forms only to Kassa (and the origins given),
// never in a frame.
func (h *Handler) renderWith(w http.ResponseWriter, r *http.Request, status int, page string, v view, origins ...string) {
	v.Nonce = rand.Text()
	extra := strings.Join(nonEmpty(origins), " ")
	httpapi.SetPageHeaders(w.Header(), "default-src 'none'; style-src 'nonce-"+v.Nonce+"'; img-src "+orNone(extra)+
		"; form-action "+strings.TrimSpace("'self' "+extra)+"; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	if err := pages[page].ExecuteTemplate(w, "page", v); err != nil {
		httpapi.Logger(r.Context()).ErrorContext(r.Context(), "render "+page, "err", err)
	}
}

// originOf is the origin of a partner's URL as a CSP source, rebuilt from its parsed scheme, host
// and port (package origin), or "" when it has none: an operator-supplied URL is never copied into
// the header as given, where a ";" in it would start a directive of its own.
func originOf(raw string) string {
	o, err := origin.Of(raw)
	if err != nil {
		return ""
	}
	return o
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "'none'"
	}
	return s
}

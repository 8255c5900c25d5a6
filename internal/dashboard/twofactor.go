package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// Two-factor authentication in the dashboard. A user with a second factor gives its code after the
// password, before a session starts; a user of a merchant that requires one and has none sets it up
// then. The step between is a sealed cookie naming the user and the one step it allows
// (user.Pending), sent only to the sign-in pages, which lasts five minutes: the password of a user
// with a factor opens the code step and nothing else.
const (
	pendingCookie = "kassa_dashboard_2fa"
	codePath      = "/dashboard/sign-in/code"
	enrolPath     = "/dashboard/sign-in/enrol"
	accountPath   = "/dashboard/account"
	setupPath     = "/dashboard/account/two-factor/setup"
)

// stepPaths are the pages of the steps after the password.
var stepPaths = map[user.Step]string{user.StepCode: codePath, user.StepEnrol: enrolPath}

// secondStep sends a person whose password was right to the step its second factor needs, and reports
// whether it did; false: it has none and needs none, and a session may start.
func (h *Handler) secondStep(w http.ResponseWriter, r *http.Request, u user.Person) (bool, error) {
	var step user.Step
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		step, err = user.NextStep(r.Context(), q, u.ID)
		return err
	})
	if err != nil || step == user.StepNone {
		return false, err
	}
	now := h.cfg.Now()
	h.setCookie(w, pendingCookie, h.cfg.TwoFactor.Pending(u.ID, step, now), signInPath, now.Add(user.PendingTTL), http.SameSiteStrictMode)
	http.Redirect(w, r, stepPaths[step], http.StatusSeeOther)
	return true, nil
}

// pending returns the person between password and second factor whose pending cookie allows step;
// without one (none, expired, or made for the other step) the cookie is cleared and the browser is
// asked to sign in again.
func (h *Handler) pending(w http.ResponseWriter, r *http.Request, step user.Step) (user.Person, bool) {
	if c, err := r.Cookie(pendingCookie); err == nil {
		if id, ok := h.cfg.TwoFactor.OpenPending(c.Value, step, h.cfg.Now()); ok {
			var p user.Person
			err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
				var err error
				p, err = user.GetPerson(r.Context(), q, id)
				return err
			})
			if err == nil {
				return p, true
			}
			if !errors.Is(err, user.ErrNotFound) {
				h.fail(w, r, err)
				return user.Person{}, false
			}
		}
	}
	h.setCookie(w, pendingCookie, "", signInPath, time.Time{}, http.SameSiteStrictMode)
	h.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Error: "Your sign-in has expired. Sign in again."})
	return user.Person{}, false
}

// codePage asks for the code of the user's authenticator app, or a recovery code.
func (h *Handler) codePage(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.pending(w, r, user.StepCode); ok {
		h.render(w, r, http.StatusOK, "code", view{Title: "Two-factor authentication"})
	}
}

// code checks the second factor and starts the session.
func (h *Handler) code(w http.ResponseWriter, r *http.Request) {
	u, ok := h.pending(w, r, user.StepCode)
	if !ok {
		return
	}
	recovery, err := h.cfg.TwoFactor.Check(r.Context(), u.ID, r.PostFormValue("code"), h.cfg.Now())
	if h.answerRefusal(w, r, err, func(status int, msg string) {
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(user.CodeLockout/time.Second)))
		}
		h.render(w, r, status, "code", view{Title: "Two-factor authentication", Error: msg})
	}) {
		return
	}
	h.setCookie(w, pendingCookie, "", signInPath, time.Time{}, http.SameSiteStrictMode)
	if !recovery {
		h.startHome(w, r, u)
		return
	}
	home, err := h.homeOf(r, u)
	if h.answerRefusal(w, r, err, func(status int, msg string) { h.render(w, r, status, "signin", view{Title: "Sign in", Error: msg}) }) {
		return
	}
	if h.startSession(w, r, home) {
		http.Redirect(w, r, accountPath+"?recovery=used", http.StatusSeeOther)
	}
}

// homeOf reads the membership person p signs in to (user.Home).
func (h *Handler) homeOf(r *http.Request, p user.Person) (user.User, error) {
	var u user.User
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		u, err = user.Home(r.Context(), q, p.ID)
		return err
	})
	return u, err
}

// enrolPage offers a new secret to a user whose merchant requires a second factor, during sign-in.
func (h *Handler) enrolPage(w http.ResponseWriter, r *http.Request) {
	if u, ok := h.pending(w, r, user.StepEnrol); ok {
		h.renderEnrol(w, r, http.StatusOK, u, enrolPath, "", view{Notice: "Your merchant requires two-factor authentication: set it up to sign in."})
	}
}

// enrol confirms the secret offered during sign-in, starts the session and shows the recovery codes.
// It sets up a factor where there is none and never replaces one (user.TwoFactor.Confirm).
func (h *Handler) enrol(w http.ResponseWriter, r *http.Request) {
	u, ok := h.pending(w, r, user.StepEnrol)
	if !ok {
		return
	}
	token := r.PostFormValue("enrolment")
	home, err := h.homeOf(r, u)
	var codes []string
	if err == nil {
		codes, err = h.cfg.TwoFactor.Confirm(r.Context(), u, token, r.PostFormValue("code"), h.cfg.Now())
	}
	if err == nil {
		err = h.factorChanged(h.actor(r.Context(), r, u.ID), home, factorEnabled)
	}
	if err != nil {
		h.enrolRefused(w, r, u, enrolPath, token, err)
		return
	}
	h.setCookie(w, pendingCookie, "", signInPath, time.Time{}, http.SameSiteStrictMode)
	if h.startSession(w, r, home) {
		h.render(w, r, http.StatusOK, "recovery", view{Title: "Recovery codes", Codes: codes, Notice: "Two-factor authentication is on."})
	}
}

// renderEnrol shows u a secret to set up — the one of token when it is still good, else a new one —
// with a QR code, the key to type, and the form for its first code (and, to replace a factor in place,
// a code of the current one), posted to action.
func (h *Handler) renderEnrol(w http.ResponseWriter, r *http.Request, status int, u user.Person, action, token string, v view) {
	e, err := h.cfg.TwoFactor.Resume(u, token, h.cfg.Now())
	if err != nil {
		if e, err = h.cfg.TwoFactor.Begin(u, h.cfg.Now()); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if action == setupPath {
		if v.TwoFactor, err = h.factorStatus(r, u.ID); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	v.Title, v.Enrolment, v.Action = "Set up two-factor authentication", &e, action
	if v.TwoFactor.Enabled {
		v.Title = "Replace your authenticator"
	}
	h.render(w, r, status, "enrol", v)
}

// enrolRefused shows the enrolment again after a refused code, with the secret already shown when its
// token is still good: the entry the user scanned keeps working.
func (h *Handler) enrolRefused(w http.ResponseWriter, r *http.Request, u user.Person, action, token string, err error) {
	h.answerRefusal(w, r, err, func(status int, msg string) {
		if _, rerr := h.cfg.TwoFactor.Resume(u, token, h.cfg.Now()); rerr != nil {
			msg += " This setup has expired: scan the new code below."
		}
		h.renderEnrol(w, r, status, u, action, token, view{Error: msg})
	})
}

// factorStatus reads the second factor of user id.
func (h *Handler) factorStatus(r *http.Request, id string) (user.Status, error) {
	var st user.Status
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		st, err = user.StatusOf(r.Context(), q, id)
		return err
	})
	return st, err
}

// A change of a user's second factor, as its audit record names it.
const (
	factorEnabled   = "two_factor.enable"
	factorReplaced  = "two_factor.replace"
	factorDisabled  = "two_factor.disable"
	factorRecovered = "two_factor.recovery_codes"
)

// factorMail is what the e-mail about each change tells the user.
var factorMail = map[string]string{
	factorEnabled:   "Two-factor authentication was turned on for your account.",
	factorReplaced:  "Your two-factor authentication was moved to a new authenticator app; the old app's codes and your old recovery codes no longer work.",
	factorDisabled:  "Two-factor authentication was turned off for your account.",
	factorRecovered: "New recovery codes were made for your account; the old ones no longer work.",
}

// factorChanged records a change of u's second factor in the audit log and e-mails u about it, in one
// transaction: a change made by someone who took over a session or a password is seen by the owner of
// the account at once.
func (h *Handler) factorChanged(ctx context.Context, u user.User, op string) error {
	return h.cfg.DB.Write(ctx, func(tx *store.Tx) error { return h.factorChangedIn(ctx, tx, u, op) })
}

// factorChangedIn is factorChanged in the caller's transaction.
func (h *Handler) factorChangedIn(ctx context.Context, tx *store.Tx, u user.User, op string) error {
	now := h.cfg.Now()
	if err := record(ctx, tx, u.MerchantID, op, "", "", now); err != nil {
		return err
	}
	text := "Your two-factor method changed.\n\n" + factorMail[op] + "\n\nWhen: " + now.UTC().Format("2006-01-02 15:04 UTC") +
		"\nFrom: " + audit.ActorFrom(ctx).Address + "\n\nIf this was not you, reset your password and tell the owner of your merchant's account at once.\n"
	return billing.Queue(ctx, tx, u.MerchantID, billing.Message{Kind: billing.KindAccountNotice, To: u.Email, Subject: "Your two-factor method changed", Text: text}, now)
}

// answerRefusal answers err with show when it is a refusal the user can understand (a *fault.Error:
// a wrong code, a rule of the merchant), its status and its message as a sentence, and anything else
// as a failure. It reports whether it answered: false when err is nil.
func (h *Handler) answerRefusal(w http.ResponseWriter, r *http.Request, err error, show func(status int, msg string)) bool {
	var f *fault.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &f):
		show(f.Status, fault.Sentence(f.Message))
	default:
		h.fail(w, r, err)
	}
	return true
}

// account shows the signed-in user's account: its second factor and what can be done with it.
func (h *Handler) account(w http.ResponseWriter, r *http.Request) {
	v := view{Title: "Account"}
	switch {
	case r.URL.Query().Get("recovery") == "used":
		v.Notice = "You signed in with a recovery code, which is now used up."
	case r.URL.Query().Get("password") == "changed":
		v.Notice = "Your password is changed, and your other sessions have ended."
	}
	h.renderAccount(w, r, http.StatusOK, v)
}

func (h *Handler) renderAccount(w http.ResponseWriter, r *http.Request, status int, v view) {
	sess := signedIn(r)
	var err error
	if v.Sessions, err = h.cfg.Sessions.List(r.Context(), sess.UserID, mustCookie(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		if v.TwoFactor, err = user.StatusOf(r.Context(), q, sess.UserID); err != nil {
			return err
		}
		v.Required, err = user.RequiresTwoFactor(r.Context(), q, sess.MerchantID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Title = "Account"
	h.render(w, r, status, "account", v)
}

// sessionUser reads the signed-in user.
func (h *Handler) sessionUser(r *http.Request) (user.User, error) {
	var u user.User
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		u, err = user.Get(r.Context(), q, signedIn(r).MerchantID, signedIn(r).UserID)
		return err
	})
	return u, err
}

// setupPage offers the signed-in user a new secret: to set up a second factor, or to replace the one
// in place (which takes a code of it).
func (h *Handler) setupPage(w http.ResponseWriter, r *http.Request) {
	u, err := h.sessionUser(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderEnrol(w, r, http.StatusOK, u.Person, setupPath, "", view{})
}

// setup confirms the signed-in user's new secret and shows the recovery codes. Over a factor in place
// it takes a code of that factor, or a recovery code (user.TwoFactor.Replace): a session alone, which
// may have been taken over, cannot move the account's second factor to another phone.
func (h *Handler) setup(w http.ResponseWriter, r *http.Request) {
	u, err := h.sessionUser(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	st, err := h.factorStatus(r, u.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	token, code, now := r.PostFormValue("enrolment"), r.PostFormValue("code"), h.cfg.Now()
	var codes []string
	op := factorEnabled
	if st.Enabled {
		op = factorReplaced
		codes, err = h.cfg.TwoFactor.Replace(r.Context(), u.Person, r.PostFormValue("current_code"), token, code, now)
	} else {
		codes, err = h.cfg.TwoFactor.Confirm(r.Context(), u.Person, token, code, now)
	}
	if err == nil {
		err = h.factorChanged(r.Context(), u, op)
	}
	if err != nil {
		h.enrolRefused(w, r, u.Person, setupPath, token, err)
		return
	}
	notice := "Two-factor authentication is on."
	if op == factorReplaced {
		notice = "Your new authenticator app is set up; the old one's codes no longer work."
	}
	h.render(w, r, http.StatusOK, "recovery", view{Title: "Recovery codes", Codes: codes, Notice: notice})
}

// recoveryCodes replaces the signed-in user's recovery codes, once a current code confirms the
// request, and shows the new ones.
func (h *Handler) recoveryCodes(w http.ResponseWriter, r *http.Request) {
	u, err := h.sessionUser(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, err = h.cfg.TwoFactor.Check(r.Context(), u.ID, r.PostFormValue("code"), h.cfg.Now())
	if h.refusedOnAccount(w, r, err) {
		return
	}
	var codes []string
	err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		var err error
		if codes, err = user.NewRecoveryCodes(r.Context(), tx, u.ID); err != nil {
			return err
		}
		return h.factorChangedIn(r.Context(), tx, u, factorRecovered)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "recovery", view{Title: "Recovery codes", Codes: codes, Notice: "Your old recovery codes no longer work."})
}

// disable turns the signed-in user's second factor off, once a current code confirms the request,
// unless the merchant requires it.
func (h *Handler) disable(w http.ResponseWriter, r *http.Request) {
	u, err := h.sessionUser(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, err = h.cfg.TwoFactor.Check(r.Context(), u.ID, r.PostFormValue("code"), h.cfg.Now())
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			if err := user.Disable(r.Context(), tx, u.ID); err != nil {
				return err
			}
			return h.factorChangedIn(r.Context(), tx, u, factorDisabled)
		})
	}
	if h.refusedOnAccount(w, r, err) {
		return
	}
	h.renderAccount(w, r, http.StatusOK, view{Notice: "Two-factor authentication is off."})
}

// refusedOnAccount shows the account page with the message of a refused code or change.
func (h *Handler) refusedOnAccount(w http.ResponseWriter, r *http.Request, err error) bool {
	return h.answerRefusal(w, r, err, func(status int, msg string) { h.renderAccount(w, r, status, view{Error: msg}) })
}

// requireTwoFactor sets the merchant's "require 2FA for all staff". Turned on, it ends the sessions of
// the staff who have no second factor, so that each sets one up at its next sign-in.
func (h *Handler) requireTwoFactor(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	on := r.PostFormValue("required") == "on"
	now := h.cfg.Now()
	var ended []string
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		ended = nil // the batch may run this function again
		if err := user.SetRequireTwoFactor(r.Context(), tx, sess.MerchantID, on); err != nil {
			return err
		}
		if err := record(r.Context(), tx, sess.MerchantID, "merchant.require_two_factor", "", map[bool]string{true: "on", false: "off"}[on], now); err != nil || !on {
			return err
		}
		staff, err := user.List(r.Context(), tx, sess.MerchantID)
		if err != nil {
			return err
		}
		for _, u := range staff {
			st, err := user.StatusOf(r.Context(), tx, u.ID)
			if err != nil {
				return err
			}
			if !st.Enabled {
				if err := user.EndAll(r.Context(), tx, u.ID, now); err != nil {
					return err
				}
				ended = append(ended, u.ID)
			}
		}
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, id := range ended {
		h.cfg.Sessions.Forget(id)
	}
	if slices.Contains(ended, sess.UserID) {
		h.clearSession(w)
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
		return
	}
	notice := "Two-factor authentication is no longer required."
	if on {
		notice = "Two-factor authentication is now required of all staff; those without it set it up at their next sign-in."
	}
	h.renderStaff(w, r, http.StatusOK, view{Notice: notice})
}

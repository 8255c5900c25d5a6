package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// resetPause is how soon after a reset link the forgotten-password form sends another to the same
// user: not sooner, so that the form cannot flood a mailbox.
const resetPause = time.Minute

// passwordPage serves the page of a link (a reset or an invitation): the form to choose a password,
// an invitation to accept for a person who has a password already, or a page that says the link no
// longer works.
func (h *Handler) passwordPage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if o, ok := h.openLink(w, r, token); ok {
		h.renderLink(w, r, http.StatusOK, o, token, "")
	}
}

// renderLink shows the page of link o.
func (h *Handler) renderLink(w http.ResponseWriter, r *http.Request, status int, o user.Opened, token, msg string) {
	v := view{Title: "Choose a password", Email: o.Email, Token: token, Invite: o.Kind == user.Invite, Error: msg}
	if o.Kind == user.Invite {
		v.Data = o.Invitation
		if !o.NeedsPassword() {
			v.Title = "Join " + o.Invitation.Merchant
		}
	}
	h.render(w, r, status, "password", v)
}

// openLink reads a link that can still be used; otherwise it answers and reports false.
func (h *Handler) openLink(w http.ResponseWriter, r *http.Request, token string) (user.Opened, bool) {
	var o user.Opened
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		o, err = user.OpenLink(r.Context(), q, token, h.cfg.Now())
		return err
	})
	switch {
	case errors.Is(err, user.ErrBadLink):
		h.render(w, r, http.StatusNotFound, "message", view{Title: "This link does not work",
			Error: "The link was used already, has expired, or was never issued. Ask for a new one on the sign-in page (Forgot your password?)."})
		return o, false
	case err != nil:
		h.fail(w, r, err)
		return o, false
	}
	return o, true
}

// setPassword uses a link: it sets the password where the link sets one, which ends every session of
// the person, and accepts an invitation, whose merchant the person then signs in to; the browser then
// signs in. The link is checked before the password is hashed, so that nobody without a link can make
// Kassa hash, and the hash is computed within the server's password gate.
func (h *Handler) setPassword(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	o, ok := h.openLink(w, r, token)
	if !ok {
		return
	}
	var hash string
	if o.NeedsPassword() {
		pw := r.PostFormValue("password")
		if pw != r.PostFormValue("confirm") {
			h.renderLink(w, r, http.StatusBadRequest, o, token, "The two passwords differ.")
			return
		}
		var err error
		hash, err = user.HashPassword(r.Context(), h.cfg.Auth.Passwords(), pw)
		var f *fault.Error
		if errors.As(err, &f) {
			msg := "The password " + f.Message + "."
			if f.Field == "" {
				msg = fault.Sentence(f.Message)
			}
			h.renderLink(w, r, f.Status, o, token, msg)
			return
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
	}
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		used, err := user.UseLink(r.Context(), tx, token, hash, h.cfg.Now())
		if err != nil || used.Kind != user.Invite {
			return err
		}
		ctx := h.actor(r.Context(), r, used.ID)
		return record(ctx, tx, used.Invitation.MerchantID, "user.join", "user/"+used.ID, "role "+string(used.Invitation.Role), h.cfg.Now())
	})
	if errors.Is(err, user.ErrBadLink) { // used by a request that raced this one
		h.openLink(w, r, token)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.cfg.Sessions.Forget(o.ID)
	next := signInPath + "?password=set"
	if !o.NeedsPassword() {
		next = signInPath + "?joined=1"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) forgotPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "forgot", view{Title: "Reset your password"})
}

// forgot sends a reset link (30 minutes, once) through the outbox to the user who signs in with the
// e-mail given, and answers the same whether there is one or not.
func (h *Handler) forgot(w http.ResponseWriter, r *http.Request) {
	email := strings.TrimSpace(r.PostFormValue("email"))
	now := h.cfg.Now()
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		p, err := user.ByEmail(r.Context(), tx, email)
		if errors.Is(err, user.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if recent, err := user.RecentReset(r.Context(), tx, p.ID, resetPause, now); err != nil || recent {
			return err
		}
		// The e-mail goes out under the merchant the person signs in to; a person on no merchant's
		// staff yet (its invitations waiting) gets none, as an unknown e-mail.
		u, err := user.Home(r.Context(), tx, p.ID)
		if errors.Is(err, user.ErrNoMerchant) {
			return nil
		}
		if err != nil {
			return err
		}
		_, _, err = SendLink(r.Context(), tx, u, user.Reset, h.cfg.PublicURL, true, now)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "forgot", view{Title: "Reset your password", Email: email, Sent: true})
}

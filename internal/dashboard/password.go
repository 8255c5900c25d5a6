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

// passwordPage serves the page of a password link (a reset or an invitation): the form to choose a
// password, or a page that says the link no longer works.
func (h *Handler) passwordPage(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	u, kind, ok := h.openLink(w, r, token)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "password", view{Title: "Choose a password", Email: u.Email, Token: token, Invite: kind == user.Invite})
}

// openLink reads a link that can still be used; otherwise it answers and reports false.
func (h *Handler) openLink(w http.ResponseWriter, r *http.Request, token string) (user.User, user.LinkKind, bool) {
	var u user.User
	var kind user.LinkKind
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		u, kind, err = user.OpenLink(r.Context(), q, token, h.cfg.Now())
		return err
	})
	switch {
	case errors.Is(err, user.ErrBadLink):
		h.render(w, r, http.StatusNotFound, "message", view{Title: "This link does not work",
			Error: "The link was used already, has expired, or was never issued. Ask for a new one on the sign-in page (Forgot your password?)."})
		return u, kind, false
	case err != nil:
		h.fail(w, r, err)
		return u, kind, false
	}
	return u, kind, true
}

// setPassword sets the password of a link's user, which uses the link up and ends every session of
// the user; the browser then signs in with it. The link is checked before the password is hashed, so
// that nobody without a link can make Kassa hash.
func (h *Handler) setPassword(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	u, kind, ok := h.openLink(w, r, token)
	if !ok {
		return
	}
	v := view{Title: "Choose a password", Email: u.Email, Token: token, Invite: kind == user.Invite}
	pw := r.PostFormValue("password")
	if pw != r.PostFormValue("confirm") {
		v.Error = "The two passwords differ."
		h.render(w, r, http.StatusBadRequest, "password", v)
		return
	}
	hash, err := user.HashPassword(r.Context(), h.cfg.Auth.Passwords(), pw)
	var f *fault.Error
	if errors.As(err, &f) {
		v.Error = "The password " + f.Message + "."
		if f.Field == "" {
			v.Error = fault.Sentence(f.Message)
		}
		h.render(w, r, f.Status, "password", v)
		return
	}
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			_, err := user.UseLink(r.Context(), tx, token, hash, h.cfg.Now())
			return err
		})
	}
	if errors.Is(err, user.ErrBadLink) { // used by a request that raced this one
		h.openLink(w, r, token)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.cfg.Sessions.Forget(u.ID)
	http.Redirect(w, r, signInPath+"?password=set", http.StatusSeeOther)
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
		u, err := user.ByEmail(r.Context(), tx, email)
		if errors.Is(err, user.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if recent, err := user.RecentReset(r.Context(), tx, u.ID, resetPause, now); err != nil || recent {
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

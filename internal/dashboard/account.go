package dashboard

import (
	"errors"
	"net/http"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// changePassword changes the signed-in user's password once the current one is given: every session of
// the user ends, and this browser gets a new one. The current password is checked as an untrusted
// sign-in is (auth.Service.CheckPassword: counted per user before it is verified, within the password
// gate), and the new one is hashed within the gate: a session taken over can neither guess the
// password faster than a stranger nor exhaust the server's memory.
func (h *Handler) changePassword(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	err := h.cfg.Auth.CheckPassword(r.Context(), sess.Email, r.PostFormValue("current_password"))
	if status, msg, refused := auth.Refusal(w.Header(), err, h.cfg.Now()); refused {
		if errors.Is(err, auth.ErrBadCredentials) {
			status, msg = http.StatusBadRequest, "Your current password is not right."
		}
		h.renderAccount(w, r, status, view{Error: msg})
		return
	} else if err != nil {
		h.fail(w, r, err)
		return
	}
	hash, err := user.HashPassword(r.Context(), h.cfg.Auth.Passwords(), r.PostFormValue("new_password"))
	if h.refusedOnAccount(w, r, err) {
		return
	}
	now := h.cfg.Now()
	err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		if err := user.SetPassword(r.Context(), tx, sess.UserID, hash, now); err != nil {
			return err
		}
		return record(r.Context(), tx, sess.MerchantID, "user.password", "", "", now)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.cfg.Sessions.Forget(sess.UserID)
	var u user.User
	err = h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		var err error
		u, err = user.Get(r.Context(), q, sess.MerchantID, sess.UserID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.startSession(w, r, u) {
		http.Redirect(w, r, accountPath+"?password=changed", http.StatusSeeOther)
	}
}

// endSession ends one of the signed-in user's sessions; ending its own signs this browser out.
func (h *Handler) endSession(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	handle := r.PathValue("handle")
	current := handle == user.HandleOf(mustCookie(r))
	err := h.cfg.Sessions.EndHandle(r.Context(), sess.UserID, handle)
	if err == nil {
		err = h.recordAlone(r.Context(), sess.MerchantID, "session.end")
	}
	switch {
	case errors.Is(err, user.ErrNotFound):
		h.renderAccount(w, r, http.StatusNotFound, view{Error: "That session has ended already."})
	case err != nil:
		h.fail(w, r, err)
	case current:
		h.clearSession(w)
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
	default:
		h.renderAccount(w, r, http.StatusOK, view{Notice: "The session has ended."})
	}
}

// mustCookie is the session cookie's value of a request that requireRole let through.
func mustCookie(r *http.Request) string {
	c, _ := r.Cookie(sessionCookie)
	return c.Value
}

package dashboard

import (
	"errors"
	"net/http"
	"strings"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/user"
)

// staffRow is one user on the Staff page.
type staffRow struct {
	user.User
	Manageable bool // the signed-in user may change or remove it
	TwoFactor  bool // it has a second factor
}

// staff serves the Staff page: the merchant's users, with the actions the signed-in user may take.
func (h *Handler) staff(w http.ResponseWriter, r *http.Request) {
	h.renderStaff(w, r, http.StatusOK, view{})
}

// renderStaff renders the Staff page with v's message or invitation link.
func (h *Handler) renderStaff(w http.ResponseWriter, r *http.Request, status int, v view) {
	sess := signedIn(r)
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		list, err := user.List(r.Context(), q, sess.MerchantID)
		if err != nil {
			return err
		}
		for _, u := range list {
			row := staffRow{User: u, Manageable: user.MayManage(sess.Role, u.Role)}
			if !u.Pending { // of a person who has not joined, the merchant learns nothing
				st, err := user.StatusOf(r.Context(), q, u.ID)
				if err != nil {
					return err
				}
				row.TwoFactor = st.Enabled
			}
			v.Staff = append(v.Staff, row)
		}
		v.Required, err = user.RequiresTwoFactor(r.Context(), q, sess.MerchantID)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Title, v.InviteRole = "Staff", inviteRole
	for _, role := range user.Roles {
		if user.MayManage(sess.Role, role) {
			v.Grantable = append(v.Grantable, role)
		}
	}
	h.render(w, r, status, "staff", v)
}

// inviteRole is the role an invitation gives unless its sender chooses another: the least, so that
// a hurried invitation never hands out more than taking payments.
const inviteRole = user.Sales

// invite puts a person on the merchant's staff, waiting for it to accept, and e-mails it the link
// that accepts (72 hours): a person new to Kassa chooses its password there; one who signs in already
// keeps its own. The answer is the same whoever the address belongs to, and the link is never shown
// on the page: whether an address is someone's sign-in elsewhere is no business of this merchant's,
// and only the person, through its mailbox, accepts a place on a merchant's staff. Without a role it
// invites as inviteRole.
func (h *Handler) invite(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	name := r.PostFormValue("role")
	if strings.TrimSpace(name) == "" {
		name = string(inviteRole)
	}
	role, err := user.ParseRole(name)
	if err == nil && !user.MayManage(sess.Role, role) {
		err = user.ErrOwnersOnly
	}
	email := strings.TrimSpace(r.PostFormValue("email"))
	if err == nil {
		now := h.cfg.Now()
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			u, err := user.Create(r.Context(), tx, user.New{MerchantID: sess.MerchantID, Email: email, Role: role, Invited: true}, now)
			if err != nil {
				return err
			}
			if err := record(r.Context(), tx, sess.MerchantID, "user.invite", "user/"+u.ID, "role "+string(role), now); err != nil {
				return err
			}
			_, _, err = SendLink(r.Context(), tx, u, user.Invite, h.cfg.PublicURL, true, now)
			return err
		})
	}
	if h.refused(w, r, err) {
		return
	}
	h.renderStaff(w, r, http.StatusOK, view{Notice: "Invited " + email + " as " + role.Label() + ". The invitation is on its way by e-mail; it works for 72 hours."})
}

// setRole changes a user's role.
func (h *Handler) setRole(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	id := r.PathValue("id")
	role, err := user.ParseRole(r.PostFormValue("role"))
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			if _, err := user.SetRole(r.Context(), tx, sess.MerchantID, id, role, sess.Role, h.cfg.Now()); err != nil {
				return err
			}
			return record(r.Context(), tx, sess.MerchantID, "user.role", "user/"+id, "role "+string(role), h.cfg.Now())
		})
	}
	if h.refused(w, r, err) {
		return
	}
	h.cfg.Sessions.Forget(id)
	http.Redirect(w, r, "/dashboard/staff", http.StatusSeeOther)
}

// remove takes a user off the merchant's staff; its sessions at the merchant end.
func (h *Handler) remove(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	id := r.PathValue("id")
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		if err := user.Remove(r.Context(), tx, sess.MerchantID, id, sess.Role, h.cfg.Now()); err != nil {
			return err
		}
		return record(r.Context(), tx, sess.MerchantID, "user.remove", "user/"+id, "", h.cfg.Now())
	})
	if h.refused(w, r, err) {
		return
	}
	h.cfg.Sessions.Forget(id)
	if id == sess.UserID {
		h.clearSession(w)
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/dashboard/staff", http.StatusSeeOther)
}

// refused answers a staff action that failed: a refusal the user can understand (a bad field, the
// last owner, an admin touching an owner, an unknown user) on the Staff page with its status, and
// anything else as a failure. It reports whether it answered.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, err error) bool {
	if errors.Is(err, user.ErrNotFound) {
		h.renderStaff(w, r, http.StatusNotFound, view{Error: "No such user works for this merchant."})
		return true
	}
	return h.answerRefusal(w, r, err, func(status int, msg string) { h.renderStaff(w, r, status, view{Error: msg}) })
}

package dashboard

import (
	"errors"
	"io"
	"net/http"

	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// Settings → Branding: the logo and accent colour the merchant's customers see on the hosted page,
// an invoice's page and PDF, the receipt pages and the e-mails (package branding checks and stores
// them). Managers' only, as the rest of the settings page.

// brandingView is the branding form as the settings page shows it.
type brandingView struct {
	LogoPath, Accent string
	// Field is the field a refused submission was refused for (branding.FieldLogo or
	// branding.FieldAccent), marked invalid on the form.
	Field string
}

// setBranding saves the branding form: a new logo when a file is sent, the logo removed when asked,
// and the accent colour. Both are checked before either is written, so a refusal changes nothing.
func (h *Handler) setBranding(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	refuse := func(err error) {
		var f *fault.Error
		if !errors.As(err, &f) {
			h.fail(w, r, err)
			return
		}
		h.renderSettings(w, r, f.Status, view{Error: fault.Sentence(f.Message), Field: f.Field})
	}
	accent, err := branding.ParseAccent(r.PostFormValue(branding.FieldAccent))
	if err != nil {
		refuse(err)
		return
	}
	var logo []byte
	remove := r.PostFormValue("remove_logo") == "yes"
	file, _, err := r.FormFile(branding.FieldLogo)
	switch {
	case errors.Is(err, http.ErrMissingFile) || errors.Is(err, http.ErrNotMultipart):
	case err != nil:
		refuse(fault.Invalid(branding.FieldLogo, "The logo could not be read; choose the file again."))
		return
	default:
		defer file.Close()
		data, rerr := io.ReadAll(io.LimitReader(file, branding.MaxLogoBytes+1))
		if rerr != nil {
			refuse(fault.Invalid(branding.FieldLogo, "The logo could not be read; choose the file again."))
			return
		}
		if logo, err = branding.Logo(data); err != nil {
			refuse(err)
			return
		}
	}
	now := h.cfg.Now()
	err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		if err := branding.SetAccent(r.Context(), tx, sess.MerchantID, accent, now); err != nil {
			return err
		}
		what := "accent " + accent
		if logo != nil || remove {
			if err := branding.SetLogo(r.Context(), tx, sess.MerchantID, logo, now); err != nil {
				return err
			}
			what += map[bool]string{true: ", logo removed", false: ", new logo"}[logo == nil]
		}
		return record(r.Context(), tx, sess.MerchantID, "merchant.branding", "", what, now)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "Your branding is saved: your customers see it on their next page."})
}

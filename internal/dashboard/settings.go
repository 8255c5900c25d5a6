package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/branding"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/store"
)

// Settings → eCommerce (gateway-api.md: merchants generate their Client ID and Client Secret "in the
// dashboard settings (eCommerce section)", with a configurable validity, 12 hours recommended).
// Credentials are the owners' and admins' (credentialsRoles): a reporting or sales user neither sees
// nor makes them.

// validities are the token validities a new pair may have: "choices from 20 minutes to 30 days",
// 12 hours the default.
var validities = []validity{
	{20 * time.Minute, "20 minutes"}, {time.Hour, "1 hour"}, {4 * time.Hour, "4 hours"}, {auth.DefaultValidity, "12 hours (recommended)"},
	{24 * time.Hour, "1 day"}, {7 * 24 * time.Hour, "7 days"}, {30 * 24 * time.Hour, "30 days"},
}

// validity is one choice of a new pair's token validity.
type validity struct {
	D     time.Duration
	Label string
}

// Value is the choice as the form sends it.
func (v validity) Value() string { return v.D.String() }

// clientRow is one pair as the page lists it.
type clientRow struct {
	ID, Created, Validity, LastUsed, Status string
	Active                                  bool
}

// partnerRow is one connected partner as the page lists it.
type partnerRow struct {
	ID, Name, Scopes, Approved string
}

// settingsView is what the eCommerce settings page shows.
type settingsView struct {
	Clients    []clientRow
	Partners   []partnerRow
	Validities []validity
	Default    string // the default validity's Value
	Processor  string // the processor the merchant's new payments go to
	Live       bool
	Keys       *keysView
	Branding   brandingView
	Timezone   string         // the merchant's IANA time zone
	Locale     string         // the merchant's locale, a tag of Locales
	Locales    []money.Locale // the locales a merchant may choose
}

// settings serves Settings → eCommerce.
func (h *Handler) settings(w http.ResponseWriter, r *http.Request) {
	h.renderSettings(w, r, http.StatusOK, view{})
}

func (h *Handler) renderSettings(w http.ResponseWriter, r *http.Request, status int, v view) {
	sess := signedIn(r)
	sv := &settingsView{Validities: validities, Default: auth.DefaultValidity.String()}
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		clients, err := auth.ListClients(r.Context(), q, sess.MerchantID)
		if err != nil {
			return err
		}
		for _, c := range clients {
			row := clientRow{ID: c.ClientID, Created: day(c.CreatedAt), Validity: label(c.Validity), LastUsed: "never", Status: "in use", Active: c.Active()}
			if !c.LastUsed.IsZero() {
				row.LastUsed = c.LastUsed.UTC().Format("2006-01-02 15:04 UTC")
			}
			if !c.Active() {
				row.Status = "revoked " + day(c.RevokedAt)
			}
			sv.Clients = append(sv.Clients, row)
		}
		b, err := branding.Get(r.Context(), q, sess.MerchantID)
		if err != nil {
			return err
		}
		sv.Branding = brandingView{LogoPath: b.LogoPath(), Accent: b.Accent, Field: v.Field}
		partners, err := auth.ConnectedPartners(r.Context(), q, sess.MerchantID)
		for _, p := range partners {
			sv.Partners = append(sv.Partners, partnerRow{ID: p.Partner.ID, Name: p.Partner.Name, Scopes: p.Scopes.String(), Approved: day(p.ApprovedAt)})
		}
		return err
	})
	if err == nil && h.cfg.Processors != nil {
		acct, perr := h.cfg.Processors.ForMerchant(r.Context(), sess.MerchantID)
		err = perr
		sv.Processor, sv.Live = acct.Kind, !acct.Test
	}
	if err == nil {
		sv.Keys, err = h.loadKeys(r.Context(), sess.MerchantID)
	}
	if err == nil {
		var m merchant.Merchant
		m, err = h.cfg.Merchants.Get(r.Context(), sess.MerchantID)
		sv.Timezone, sv.Locale, sv.Locales = m.Timezone, m.Language().String(), money.Locales()
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Title, v.Settings = "eCommerce settings", sv
	h.render(w, r, status, "settings", v)
}

// day is t's date, in UTC.
func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// label names a validity as the choices do, or as a duration when none is it (a pair made by the CLI).
func label(d time.Duration) string {
	for _, v := range validities {
		if v.D == d {
			return strings.TrimSuffix(v.Label, " (recommended)")
		}
	}
	return d.String()
}

// createClient makes a client-credential pair with the validity chosen and shows its secret, once.
func (h *Handler) createClient(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	d, ok := chosen(validities, r.PostFormValue("validity"))
	if !ok {
		h.renderSettings(w, r, http.StatusBadRequest, view{Error: "Choose one of the validities offered."})
		return
	}
	var c auth.Credentials
	now := h.cfg.Now()
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		var err error
		if c, err = auth.CreateClient(r.Context(), tx, sess.MerchantID, d, now); err != nil {
			return err
		}
		return record(r.Context(), tx, sess.MerchantID, "client.create", "client/"+c.ClientID, "validity "+d.String(), now)
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{NewClient: &c,
		Notice: "The pair is made. Copy its secret now: Kassa shows it this once."})
}

// revokeClient revokes one of the merchant's pairs: it gets no more tokens, and its tokens stop on
// every node within the revocation poll (at once on this one).
func (h *Handler) revokeClient(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	id := r.PathValue("id")
	var mine bool
	err := h.cfg.DB.Read(r.Context(), func(q store.Querier) error {
		list, err := auth.ListClients(r.Context(), q, sess.MerchantID)
		for _, c := range list {
			mine = mine || (c.ClientID == id && c.Active())
		}
		return err
	})
	if err == nil && !mine {
		h.renderSettings(w, r, http.StatusNotFound, view{Error: "This merchant has no such pair in use."})
		return
	}
	if err == nil {
		err = h.cfg.Auth.RevokeClient(r.Context(), id)
	}
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			return record(r.Context(), tx, sess.MerchantID, "client.revoke", "client/"+id, "", h.cfg.Now())
		})
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The pair is revoked: its tokens stop working within seconds."})
}

// revokePartner ends a connected partner's access to the merchant.
func (h *Handler) revokePartner(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	id := r.PathValue("id")
	n, err := auth.RevokePartner(r.Context(), h.cfg.DB, sess.MerchantID, id, h.cfg.Now())
	if errors.Is(err, auth.ErrUnknownPartner) || (err == nil && n == 0) {
		h.renderSettings(w, r, http.StatusNotFound, view{Error: "No such partner has access."})
		return
	}
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			return record(r.Context(), tx, sess.MerchantID, "partner.revoke", "partner/"+id, "", h.cfg.Now())
		})
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The partner's access has ended."})
}

package dashboard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/cardenc"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/web"
)

// The rest of Settings → eCommerce: the card-encryption public key with the <script> tag and SRI hash
// to paste, and key rotation with its grace period; payments-API keys (v1): list, create with
// permissions (the secret shown once), revoke; the hosted page's allowed embedding origins.

// CardKeys are the merchants' card-encryption key pairs (cardenc.Service).
type CardKeys interface {
	Current(ctx context.Context, merchantID string) (cardenc.PublicKey, error)
	Rotate(ctx context.Context, merchantID string, grace time.Duration) (cardenc.PublicKey, error)
}

// graces are the grace periods a rotation offers: how long tokens made with the old key keep opening;
// defaultGrace is the one offered first.
var graces = []validity{{0, "none: the old key stops at once"}, {24 * time.Hour, "1 day"}, {defaultGrace, "7 days (recommended)"},
	{30 * 24 * time.Hour, "30 days"}}

const defaultGrace = 7 * 24 * time.Hour

// encryptionView is the card-encryption part of the page.
type encryptionView struct {
	KeyID, Created, Key, Script string
	Graces                      []validity
	Default                     string // the recommended grace's Value
}

// apiKeyRow is one payments-API key as the page lists it.
type apiKeyRow struct {
	ID, Hint, Permissions, Created string
}

// keysView is what the page shows of card encryption, API keys and origins.
type keysView struct {
	Encryption  encryptionView
	APIKeys     []apiKeyRow
	Permissions []string
	Origins     string // one per line
}

// loadKeys fills the page's card-encryption key, API keys and allowed origins.
func (h *Handler) loadKeys(ctx context.Context, merchantID string) (*keysView, error) {
	kv := &keysView{Permissions: checkout.AllPermissions.Names()}
	k, err := h.cfg.CardKeys.Current(ctx, merchantID)
	if err != nil {
		return nil, err
	}
	kv.Encryption = encryptionView{KeyID: k.ID, Created: day(k.CreatedAt), Key: k.Encoded(), Graces: graces, Default: defaultGrace.String(),
		Script: `<script src="` + strings.TrimSuffix(h.cfg.PublicURL, "/") + web.CardEncryption.Path() + `" integrity="` +
			web.CardEncryption.Integrity + `" crossorigin="anonymous"></script>`}
	keys, err := checkout.ListKeys(ctx, h.cfg.DB, "acct_"+merchantID)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		kv.APIKeys = append(kv.APIKeys, apiKeyRow{ID: k.ID, Hint: k.Hint, Permissions: k.Permissions.String(), Created: day(k.CreatedAt)})
	}
	var m merchant.Merchant
	err = h.cfg.DB.Read(ctx, func(q store.Querier) error {
		m, err = merchant.Get(ctx, q, merchantID) // not the cache: the page shows what was just saved
		return err
	})
	if err != nil {
		return nil, err
	}
	kv.Origins = strings.Join(m.AllowedOrigins, "\n")
	return kv, nil
}

// rotateKey replaces the merchant's card-encryption key pair; tokens made with the old key keep
// opening for the grace chosen.
func (h *Handler) rotateKey(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	grace, ok := chosen(graces, r.PostFormValue("grace"))
	if !ok {
		h.renderSettings(w, r, http.StatusBadRequest, view{Error: "Choose one of the grace periods offered."})
		return
	}
	k, err := h.cfg.CardKeys.Rotate(r.Context(), sess.MerchantID, grace)
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			return record(r.Context(), tx, sess.MerchantID, "card_key.rotate", "card_key/"+k.ID, "grace "+grace.String(), h.cfg.Now())
		})
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The card-encryption key is new: put the new key in your payment form."})
}

// createAPIKey makes a payments-API key with the permissions ticked and shows its secret, once.
func (h *Handler) createAPIKey(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	if err := r.ParseForm(); err != nil {
		h.renderSettings(w, r, http.StatusBadRequest, view{Error: "The form could not be read."})
		return
	}
	perms, err := checkout.ParsePermissions(r.PostForm["permission"])
	var nk checkout.NewKey
	if err == nil {
		err = h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
			var err error
			nk, err = checkout.CreateKey(r.Context(), tx, "acct_"+sess.MerchantID, perms, "", h.cfg.Now())
			return err
		})
	}
	if h.answerRefusal(w, r, err, func(status int, msg string) { h.renderSettings(w, r, status, view{Error: msg}) }) {
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{NewKey: &nk,
		Notice: "The key is made. Copy it now: Kassa shows it this once."})
}

// revokeAPIKey deletes one of the merchant's payments-API keys; every node stops accepting it within
// the key cache's lifetime.
func (h *Handler) revokeAPIKey(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	id := r.PathValue("id")
	keys, err := checkout.ListKeys(r.Context(), h.cfg.DB, "acct_"+sess.MerchantID)
	if err == nil && !slices.ContainsFunc(keys, func(k checkout.APIKey) bool { return k.ID == id }) {
		h.renderSettings(w, r, http.StatusNotFound, view{Error: "This merchant has no such key."})
		return
	}
	if err == nil {
		_, err = checkout.RevokeKey(r.Context(), h.cfg.DB, id, h.cfg.Now())
	}
	if errors.Is(err, checkout.ErrUnknownKey) {
		h.renderSettings(w, r, http.StatusNotFound, view{Error: "This merchant has no such key."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The key is revoked."})
}

// setOrigins sets the origins whose pages may embed the merchant's hosted payment page, one per line;
// none restores the default (only the merchant's own pages: see merchant.Settings).
func (h *Handler) setOrigins(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	origins := strings.Fields(r.PostFormValue("origins"))
	if origins == nil {
		origins = []string{}
	}
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		if _, err := merchant.ApplyUpdate(r.Context(), tx, sess.MerchantID, merchant.Update{AllowedOrigins: origins}); err != nil {
			return err
		}
		return record(r.Context(), tx, sess.MerchantID, "merchant.allowed_origins", "", strings.Join(origins, " "), h.cfg.Now())
	})
	if h.answerRefusal(w, r, err, func(status int, msg string) { h.renderSettings(w, r, status, view{Error: msg}) }) {
		return
	}
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The hosted page's embedding origins are saved."})
}

// setRegion sets the merchant's time zone, whose days every date and day boundary of the dashboard
// follows, and the locale amounts are shown in. A bad one is refused naming its field, and neither is
// saved.
func (h *Handler) setRegion(w http.ResponseWriter, r *http.Request) {
	sess := signedIn(r)
	zone, locale := strings.TrimSpace(r.PostFormValue("timezone")), r.PostFormValue("locale")
	err := h.cfg.DB.Write(r.Context(), func(tx *store.Tx) error {
		if _, err := merchant.ApplyUpdate(r.Context(), tx, sess.MerchantID, merchant.Update{Timezone: &zone, Locale: &locale}); err != nil {
			return err
		}
		return record(r.Context(), tx, sess.MerchantID, "merchant.region", "", zone+" "+locale, h.cfg.Now())
	})
	if h.answerRefusal(w, r, err, func(status int, msg string) { h.renderSettings(w, r, status, view{Error: msg}) }) {
		return
	}
	h.cfg.Merchants.Forget(sess.MerchantID)
	h.renderSettings(w, r, http.StatusOK, view{Notice: "The time zone and locale are saved."})
}

// chosen is the choice of choices whose value the form sent.
func chosen(choices []validity, value string) (time.Duration, bool) {
	for _, c := range choices {
		if c.Value() == value {
			return c.D, true
		}
	}
	return 0, false
}

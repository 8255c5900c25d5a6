package checkout

import (
	"io"
	"net/http"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// WireKey is an API key as the v1 API (and the operator's CLI) shows it. Key, the secret, is there
// only in the answer to its creation.
type WireKey struct {
	ID          string   `json:"id"`
	Object      string   `json:"object"`
	Key         string   `json:"key,omitempty"`
	KeyHint     string   `json:"key_hint"`
	AccountID   string   `json:"account_id"`
	Permissions []string `json:"permissions"`
	Created     int64    `json:"created"`
}

// Wire is the key as the v1 API shows it, without its secret.
func (k APIKey) Wire() WireKey {
	return WireKey{ID: k.ID, Object: "api_key", KeyHint: "…" + k.Hint, AccountID: k.AccountID(),
		Permissions: k.Permissions.Names(), Created: k.CreatedAt.Unix()}
}

// List is the v1 list envelope: {"object": "list", "data": […], "has_more": …}.
type List[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// ownAccount refuses a request about API keys that acts for another account than the key's own: a
// partner's key manages the partner's keys, never those of the merchants it acts for, so that a
// partner cannot give itself more than a merchant granted.
func ownAccount(c Caller) error {
	if c.Account != c.Key.AccountID() {
		return fault.New(http.StatusForbidden, "account_forbidden",
			"API keys are managed by the account they belong to: send %s %s to manage this key's account.", HeaderAccount, c.Key.AccountID())
	}
	return nil
}

// keyBody is the body that creates an API key.
type keyBody struct {
	Permissions *[]string `json:"permissions"`
}

// parseKeyBody reads the body of an API-key creation: the permissions, every one of which the
// creating key must hold itself.
func parseKeyBody(body []byte, holder Permissions) (Permissions, error) {
	var b keyBody
	if err := httpapi.UnmarshalStrict(body, &b, ""); err != nil {
		return 0, err
	}
	if b.Permissions == nil || len(*b.Permissions) == 0 {
		return 0, fault.Invalid("permissions", "permissions is required: a list of %s", strings.Join(AllPermissions.Names(), ", "))
	}
	p, err := ParsePermissions(*b.Permissions)
	if err != nil {
		return 0, fault.Invalid("permissions", "permissions: %s", err)
	}
	if extra := p &^ holder; extra != 0 {
		return 0, &fault.Error{Status: http.StatusForbidden, Code: "insufficient_permissions", Field: "permissions",
			Message: "A key can grant only permissions it holds itself; this key lacks " + strings.Join(extra.Names(), ", ") + "."}
	}
	return p, nil
}

func (s *Service) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c := CallerFrom(ctx)
	if err := ownAccount(c); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	perms, err := parseKeyBody(body, c.Key.Permissions)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	var k NewKey
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		k, err = CreateKey(ctx, tx, c.Key.AccountID(), perms, c.Key.ID, s.now())
		return err
	})
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := k.Wire()
	out.Key = k.Key
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleListKeys(w http.ResponseWriter, r *http.Request) {
	c := CallerFrom(r.Context())
	if err := ownAccount(c); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	keys, err := listKeys(r.Context(), s.db, c.Key.Owner())
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	out := List[WireKey]{Object: "list", Data: []WireKey{}}
	for _, k := range keys {
		out.Data = append(out.Data, k.Wire())
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (s *Service) handleDeleteKey(w http.ResponseWriter, r *http.Request) {
	c := CallerFrom(r.Context())
	if err := ownAccount(c); err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	k, err := s.deleteKey(r.Context(), c, r.PathValue("id"))
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": k.ID, "object": "api_key", "deleted": true})
}

// readBody reads a request body (the middleware bounds its size).
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, httpapi.BodyError(err)
	}
	return b, nil
}

package auth

import (
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/httpapi"
)

// oauthError is an RFC 6749 §5.2 error response.
type oauthError struct {
	status      int
	Code        string        `json:"error"`
	Description string        `json:"error_description"`
	retryAfter  time.Duration // sent as Retry-After when set (a throttled sign-in)
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func invalidRequest(desc string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// unauthorizedClient refuses a grant type that the authenticated client may not use (RFC 6749 §5.2).
func unauthorizedClient(desc string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, Code: "unauthorized_client", Description: desc}
}

// invalidClient is the one answer to every failed client authentication, whatever the cause, so that
// it tells an attacker nothing about which ids exist.
func invalidClient() *oauthError {
	return &oauthError{status: http.StatusUnauthorized, Code: "invalid_client", Description: "Client authentication failed."}
}

// readParams collects the token request's parameters from the query string and from the body
// (form-urlencoded or multipart): "POST /oauth/token reads its parameters from the query string and
// from the body" (wire-contract.md, Token service). A parameter sent without a value counts as
// omitted (RFC 6749 §3.1); one sent twice with different values is an error (RFC 6749 §3.1, §3.2).
// It returns the merged parameters and, apart, those of the query string, for the grants that refuse
// a credential there.
func readParams(r *http.Request) (params, query url.Values, err error) {
	query, err = url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, nil, invalidRequest("The query string is malformed.")
	}
	var body url.Values
	ct := r.Header.Get("Content-Type")
	media, _, _ := mime.ParseMediaType(ct)
	switch {
	case media == "multipart/form-data":
		if err := r.ParseMultipartForm(httpapi.MaxBody); err != nil {
			if tooLarge(err) {
				return nil, nil, errTooLarge
			}
			return nil, nil, invalidRequest("The multipart body is malformed.")
		}
		body = r.MultipartForm.Value
	case media == "application/x-www-form-urlencoded" || ct == "":
		raw, err := readBody(r)
		if err != nil {
			return nil, nil, err
		}
		if len(raw) > 0 && ct == "" {
			return nil, nil, invalidRequest("The body must be sent as application/x-www-form-urlencoded or multipart/form-data.")
		}
		if body, err = url.ParseQuery(string(raw)); err != nil {
			return nil, nil, invalidRequest("The form body is malformed.")
		}
	default:
		raw, err := readBody(r)
		if err != nil {
			return nil, nil, err
		}
		if len(strings.TrimSpace(string(raw))) > 0 {
			return nil, nil, invalidRequest("The body must be sent as application/x-www-form-urlencoded or multipart/form-data.")
		}
	}
	out := url.Values{}
	for _, src := range []url.Values{query, body} {
		for k, vs := range src {
			for _, v := range vs {
				if !httpapi.Storable(k) || !httpapi.Storable(v) {
					// Nothing of Kassa's is named so, and a client id or an e-mail so spelled would reach a
					// database that cannot hold it (PostgreSQL refuses a NUL).
					return nil, nil, invalidRequest("A parameter is not text in UTF-8 without NUL characters.")
				}
				if v == "" {
					continue
				}
				if prev := out.Get(k); prev != "" && prev != v {
					return nil, nil, invalidRequest("The parameter " + k + " was sent more than once with different values.")
				}
				out.Set(k, v)
			}
		}
	}
	return out, query, nil
}

var errTooLarge = &oauthError{status: http.StatusRequestEntityTooLarge, Code: "invalid_request", Description: "The request body is too large."}

func readBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(r.Body)
	if tooLarge(err) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, invalidRequest("The body could not be read.")
	}
	return raw, nil
}

func tooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// clientAuth is how the client presented itself.
type clientAuth struct {
	id, secret string
}

// readClientAuth takes the client's credentials from HTTP Basic (RFC 6749 §2.3.1: id and secret are
// form-urlencoded before the base64) or from the client_id and client_secret parameters. Both present
// and disagreeing is invalid_client (wire-contract.md, Token service).
func readClientAuth(r *http.Request, p url.Values) (clientAuth, *oauthError) {
	var basic *clientAuth
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Basic") {
			return clientAuth{}, invalidClient()
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return clientAuth{}, invalidClient()
		}
		id, secret, ok := strings.Cut(string(raw), ":")
		if !ok {
			return clientAuth{}, invalidClient()
		}
		basic = &clientAuth{id: unescape(id), secret: unescape(secret)}
	}
	params := clientAuth{id: p.Get("client_id"), secret: p.Get("client_secret")}
	switch {
	case basic == nil && params.id == "":
		return clientAuth{}, invalidClient()
	case basic == nil:
		return params, nil
	case params.id != "" && params.id != basic.id, params.secret != "" && params.secret != basic.secret:
		return clientAuth{}, invalidClient()
	default:
		return *basic, nil
	}
}

// unescape undoes the form-urlencoding of a Basic credential; a value that is not valid encoding is
// taken as it is (many clients do not encode at all).
func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

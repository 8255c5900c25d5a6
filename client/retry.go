package client

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/oauth2"
)

// Retry says which failed attempts of a call are tried again, and when. A call is one request made
// through a generated method; every attempt of a POST carries the same Idempotency-Key, the caller's
// or one generated for the call, so that the server runs it once and replays its answer to the
// attempts after the first (a sale whose answer was lost is not charged twice).
//
// Retried: a network error, and a 502, 503 or 504, after a backoff (or the answer's Retry-After, when
// longer), for a POST and for the methods that RFC 9110 calls idempotent (GET, HEAD, OPTIONS, PUT,
// DELETE) — not for a PATCH, which Kassa takes without an Idempotency-Key and may have applied; a
// 429 after its Retry-After, whatever the method, since the server refused it without running it; a
// 409 of a POST that carries Retry-After (the operation its key names is still in progress) after
// that wait, with the same key. Never retried: any other answer, 4xx and 5xx alike, and an OAuth
// token endpoint's refusal.
type Retry struct {
	// MaxAttempts bounds the attempts of one call, the first included; 1 (or less) never retries.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles before each further attempt,
	// each backoff drawn at random from its upper half so that clients do not retry in step.
	BaseDelay time.Duration
	// MaxDelay bounds one wait. A backoff is cut to it; an answer that asks for a longer wait (a
	// velocity limit's Retry-After of minutes), or one that the call's context deadline would not
	// allow, ends the call with that answer rather than a wait.
	MaxDelay time.Duration
}

// DefaultRetry is the policy of New: 4 attempts, backoffs of about 0.5, 1 and 2 seconds, and a
// Retry-After honoured up to 30 seconds.
var DefaultRetry = Retry{MaxAttempts: 4, BaseDelay: 500 * time.Millisecond, MaxDelay: 30 * time.Second}

// idempotencyKeyHeader is the header of every POST of both APIs (api/openapi.yaml, "Every POST
// accepts an Idempotency-Key").
const idempotencyKeyHeader = "Idempotency-Key"

// retrier is the RoundTripper of Transport.
type retrier struct {
	policy Retry
	next   http.RoundTripper
}

func (t *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Header.Get(idempotencyKeyHeader) == "" {
		req = req.Clone(req.Context())
		// 26 base32 characters, 130 random bits: printable ASCII, well within the server's 255.
		req.Header.Set(idempotencyKeyHeader, rand.Text())
	}
	body, err := rewindable(req)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		try := req.Clone(req.Context())
		if try.Body, err = body(); err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(try)
		wait, again := t.policy.wait(req, attempt, resp, err)
		if !again {
			return resp, err
		}
		if resp != nil {
			// Read what is left of the refusal so that its connection can carry the next attempt.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
	}
}

// rewindable returns a function that gives each attempt the request's body afresh: through GetBody,
// which http.NewRequest sets for the in-memory bodies of the generated code, or from a copy read once.
func rewindable(req *http.Request) (func() (io.ReadCloser, error), error) {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return func() (io.ReadCloser, error) { return http.NoBody, nil }, nil
	case req.GetBody != nil:
		first := req.Body
		return func() (io.ReadCloser, error) {
			if b := first; b != nil {
				first = nil
				return b, nil
			}
			return req.GetBody()
		}, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, nil
}

// wait says whether the outcome of an attempt (resp or err) is tried again, and after how long.
func (p Retry) wait(req *http.Request, attempt int, resp *http.Response, err error) (time.Duration, bool) {
	if attempt >= p.MaxAttempts || req.Context().Err() != nil {
		return 0, false
	}
	backoff := p.BaseDelay
	for i := 1; i < attempt && backoff < p.MaxDelay; i++ {
		backoff *= 2
	}
	backoff = min(backoff, p.MaxDelay)
	backoff = backoff/2 + mrand.N(backoff/2+1)
	var wait time.Duration
	switch {
	case err != nil:
		var refused *oauth2.RetrieveError
		if errors.As(err, &refused) || !repeatable(req.Method) {
			return 0, false
		}
		wait = backoff
	case resp.StatusCode == http.StatusTooManyRequests:
		wait = retryAfter(resp, backoff)
	case resp.StatusCode == http.StatusConflict && resp.Header.Get("Retry-After") != "" && req.Method == http.MethodPost:
		// "A 409 that passes, because an operation the request waits on is still in progress
		// (idempotency_key_in_use, operation_in_progress, concurrent_update), carries Retry-After, and a
		// retry with the same Idempotency-Key runs afresh" (api/openapi.yaml).
		wait = retryAfter(resp, backoff)
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable,
		resp.StatusCode == http.StatusGatewayTimeout:
		if !repeatable(req.Method) {
			return 0, false
		}
		wait = max(backoff, retryAfter(resp, 0))
	default:
		return 0, false
	}
	if wait > p.MaxDelay {
		return 0, false
	}
	if deadline, ok := req.Context().Deadline(); ok && time.Until(deadline) < wait {
		return 0, false
	}
	return wait, true
}

// repeatable reports whether a request of the method may run again after an attempt whose outcome
// is unknown: POST because each of its attempts carries the same Idempotency-Key, the others because
// RFC 9110 §9.2.2 calls them idempotent.
func repeatable(method string) bool {
	switch method {
	case http.MethodPost, http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// retryAfter is the answer's Retry-After (RFC 9110 §10.2.3: seconds, or an HTTP date), or otherwise
// when it has none or one that cannot be read.
func retryAfter(resp *http.Response, otherwise time.Duration) time.Duration {
	v := resp.Header.Get("Retry-After")
	if secs, err := strconv.ParseUint(v, 10, 31); err == nil {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0)
	}
	return otherwise
}

package velocity

import (
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

// bucket is one credential's token bucket, made for a rate.
type bucket struct {
	rate int // requests a second, and as many at once
	lim  *rate.Limiter
}

// Requests wraps next, a handler behind authentication, with the request rate of the request's
// principal (httpapi.Principal): a token bucket of limits(r).RequestRate requests a second, as many
// at once, in this process. Beyond it the answer is 429 rate_limited before next runs — in front of
// idempotency, so that a refused request leaves no record and its retry runs afresh.
func (l *Limiter) Requests(limits func(*http.Request) Limits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpapi.PrincipalFrom(r.Context())
		if rl := l.allow(p, requests.quota(limits(r).Effective())); rl != nil {
			httpapi.WriteError(w, r, requests.refuse(rl))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allow takes a token from p's bucket of perSecond, and returns the state of the limit when there is
// none. A bucket made for another rate (the merchant changed it) is replaced by a full one.
func (l *Limiter) allow(p httpapi.Principal, perSecond int) *fault.RateLimit {
	now := l.now()
	l.bucketsMu.RLock()
	b := l.buckets[p]
	l.bucketsMu.RUnlock()
	if b == nil || b.rate != perSecond {
		l.bucketsMu.Lock()
		if b = l.buckets[p]; b == nil || b.rate != perSecond {
			b = &bucket{rate: perSecond, lim: rate.NewLimiter(rate.Limit(perSecond), perSecond)}
			l.buckets[p] = b
		}
		l.bucketsMu.Unlock()
	}
	if b.lim.AllowN(now, 1) {
		return nil
	}
	wait := time.Duration((1 - b.lim.TokensAt(now)) / float64(perSecond) * float64(time.Second))
	return &fault.RateLimit{Policy: requests.name, Quota: perSecond, Window: requests.window, Reset: wait}
}

// sweepBuckets drops the buckets that are full again: their credentials have been idle, and a new
// bucket starts full.
func (l *Limiter) sweepBuckets(now time.Time) {
	l.bucketsMu.Lock()
	defer l.bucketsMu.Unlock()
	for p, b := range l.buckets {
		if b.lim.TokensAt(now) >= float64(b.rate) {
			delete(l.buckets, p)
		}
	}
}

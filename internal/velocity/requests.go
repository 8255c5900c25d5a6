package velocity

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

// bucket is one subject's token bucket, made for a quota per window: as many at once, refilled
// evenly over the window.
type bucket struct {
	quota  int
	window time.Duration
	lim    *rate.Limiter
}

// buckets are the token buckets of one kind of subject, in this process.
type buckets[K comparable] struct {
	mu sync.RWMutex
	m  map[K]*bucket
}

// take takes a token at now from the bucket of k, of quota per window, and returns the state of p's
// limit when there is none. A bucket made for another quota (the merchant changed it) is replaced by
// a full one.
func (bs *buckets[K]) take(k K, p *policy, quota int, now time.Time) *fault.RateLimit {
	bs.mu.RLock()
	b := bs.m[k]
	bs.mu.RUnlock()
	if b == nil || b.quota != quota || b.window != p.window {
		bs.mu.Lock()
		if b = bs.m[k]; b == nil || b.quota != quota || b.window != p.window {
			if bs.m == nil {
				bs.m = map[K]*bucket{}
			}
			b = &bucket{quota: quota, window: p.window, lim: rate.NewLimiter(rate.Limit(float64(quota)/p.window.Seconds()), quota)}
			bs.m[k] = b
		}
		bs.mu.Unlock()
	}
	if b.lim.AllowN(now, 1) {
		return nil
	}
	wait := time.Duration((1 - b.lim.TokensAt(now)) / float64(b.lim.Limit()) * float64(time.Second))
	return &fault.RateLimit{Policy: p.name, Quota: quota, Window: p.window, Reset: wait}
}

// sweep drops the buckets that are full again: their subjects have been idle, and a new bucket
// starts full.
func (bs *buckets[K]) sweep(now time.Time) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for k, b := range bs.m {
		if b.lim.TokensAt(now) >= float64(b.quota) {
			delete(bs.m, k)
		}
	}
}

// Requests wraps next, a handler behind authentication, with the request rate of the request's
// principal (httpapi.Principal): a token bucket of limits(r).RequestRate requests a second, as many
// at once, in this process. Beyond it the answer is 429 rate_limited before next runs — in front of
// idempotency, so that a refused request leaves no record and its retry runs afresh.
func (l *Limiter) Requests(limits func(*http.Request) Limits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := httpapi.PrincipalFrom(r.Context())
		if rl := l.principals.take(p, requests, requests.quota(limits(r).Effective()), l.now()); rl != nil {
			httpapi.WriteError(w, r, requests.refuse(rl))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Public links are the pages whose URL's secret is their only credential, which anyone holding it
// opens without signing in: an invoice's page and its PDF. A customer opens one a few times; a script
// that opens one thousands of times, or tries keys to find one, is refused before its request reads
// the database, by two limits counted in memory on each node (no request writes a counter):
//
//   - LinkPerMinute requests of one link, from anywhere;
//   - AddressPerMinute requests of public links from one client address (an IPv6 client by its /64,
//     which one host commonly holds whole).
//
// Each is a token bucket of its quota, as many at once and refilled evenly over the minute. The
// limits are Kassa's, not a merchant's: the link's merchant is not known until it has been read.
const (
	LinkPerMinute    = 60
	AddressPerMinute = 120
)

var (
	linkRequests = &policy{"link", time.Minute, func(Limits) int { return LinkPerMinute },
		"This link has been opened %d times within a minute; retry in %d seconds."}
	addressRequests = &policy{"link-address", time.Minute, func(Limits) int { return AddressPerMinute },
		"This address has opened links %d times within a minute; retry in %d seconds."}
)

// PublicLink takes one request of the public link named link from the client address addr, and
// returns the 429 rate_limited of the first limit it would exceed: the address's, then the link's. A
// request the address's limit refuses is not counted against the link, so that one client cannot
// use up a customer's link by opening it.
func (l *Limiter) PublicLink(link string, addr netip.Addr) error {
	now := l.now()
	if addr.Is6() && !addr.Is4In6() {
		addr = netip.PrefixFrom(addr, 64).Masked().Addr()
	}
	if rl := l.addresses.take(addr, addressRequests, AddressPerMinute, now); rl != nil {
		return addressRequests.refuse(rl)
	}
	if rl := l.links.take(link, linkRequests, LinkPerMinute, now); rl != nil {
		return linkRequests.refuse(rl)
	}
	return nil
}

// sweepBuckets drops the buckets that are full again.
func (l *Limiter) sweepBuckets(now time.Time) {
	l.principals.sweep(now)
	l.addresses.sweep(now)
	l.links.sweep(now)
}

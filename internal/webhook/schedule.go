package webhook

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schedule is when a delivery is attempted: immediately, then after 5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h, 14 h, 20 h and 24 h; then the delivery is failed. Each delay counts from the attempt before;
// the first attempt is due when the event is recorded.
var Schedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Jitter is the share of a retry's delay by which it is moved, either way, at random: ±10 %, so that
// the retries of many deliveries that failed together (an endpoint down for a minute) do not all
// come back in the same second.
const Jitter = 0.10

// MaxRetryAfter caps how long a Retry-After header can push a delivery's next attempt back.
const MaxRetryAfter = 24 * time.Hour

// retryDelay is how long after the failure of its n-th attempt (n ≥ 1) a delivery is tried again,
// jittered; false when that was its last attempt.
func retryDelay(n int) (time.Duration, bool) {
	if n >= len(Schedule) {
		return 0, false
	}
	d := Schedule[n]
	return d + time.Duration((rand.Float64()*2-1)*Jitter*float64(d)), true
}

// retryAfter is how long an answer asks to be left alone: the Retry-After header of a 429, 502, 503
// or 504, in seconds or as an HTTP date, at most MaxRetryAfter; 0 when there is none.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		return 0
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(min(max(secs, 0), int64(MaxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/fault"
)

// WriteRateLimit reports the velocity limit l in the headers h of a response, as
// draft-ietf-httpapi-ratelimit-headers-11 (May 2026) spells them, with structured fields (RFC 9651):
//
//	RateLimit-Policy: "<name>";q=<quota>;w=<window seconds>
//	RateLimit: "<name>";r=<remaining>;t=<seconds until the quota comes back>
//
// and, once nothing remains, Retry-After in delay-seconds (RFC 9110 §10.2.3). The draft: "If a
// response contains both the Retry-After and the RateLimit header fields, the Retry-After field value
// SHOULD NOT reference a point in time earlier than the end of the effective window", so both carry
// the same rounded-up number of seconds.
func WriteRateLimit(h http.Header, l *fault.RateLimit) {
	name := `"` + l.Policy + `"` // an sf-string: policy names are fixed words of letters and hyphens
	t := l.ResetSeconds()
	h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(l.Quota)+";w="+strconv.FormatInt(int64(l.Window/time.Second), 10))
	h.Set("RateLimit", name+";r="+strconv.Itoa(l.Remaining)+";t="+strconv.FormatInt(t, 10))
	if l.Remaining == 0 {
		// "delay-seconds": a refusal never says 0, which would invite an immediate retry.
		h.Set("Retry-After", strconv.FormatInt(max(t, 1), 10))
	}
}

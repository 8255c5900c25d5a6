package httpapi

import "net/http"

// SetPageHeaders sets the headers of a server-rendered HTML page of Kassa's own (the authorization
// pages, the dashboard): its Content-Security-Policy, never in a frame (frame-ancestors in csp, and
// X-Frame-Options for older browsers), no MIME sniffing, no Referer to other sites (a page's URL may
// carry a link's secret), and never kept by a cache.
func SetPageHeaders(h http.Header, csp string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// StrictTransportSecurity is the Strict-Transport-Security of a Kassa reached over HTTPS: browsers
// that saw it reach its host only over HTTPS for a year (RFC 6797), so that no later visit, typed or
// followed from a link, starts in plain HTTP where a network could turn it away from Kassa.
const StrictTransportSecurity = "max-age=31536000"

// StrictTransport wraps next so that every answer carries StrictTransportSecurity, whoever writes it:
// a page, the API, the router's 404 and 405, the 500 of a panic. The header is set before next runs.
func StrictTransport(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", StrictTransportSecurity)
		next.ServeHTTP(w, r)
	})
}

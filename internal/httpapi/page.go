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

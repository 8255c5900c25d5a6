package httpapi

import (
	"net/http"
	"sync/atomic"
)

// Load counts the requests a server is answering, for the work that yields to them: webhook
// deliveries are paced while a node is busy with payments (webhook.Config.Requests).
type Load struct{ n atomic.Int64 }

// Count wraps next, counting each request while it is answered.
func (l *Load) Count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.n.Add(1)
		defer l.n.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// Requests is how many requests are being answered now.
func (l *Load) Requests() int { return int(l.n.Load()) }

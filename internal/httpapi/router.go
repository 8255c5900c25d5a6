// Package httpapi holds what every HTTP handler of Kassa shares: the router that records its routes
// for the OpenAPI check, the middleware (request ids, access log, panic recovery, body limit), JSON
// encoding and decoding, and the mapping of *fault.Error to the gateway API's error body.
package httpapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/kassapay/kassa/internal/fault"
)

// Route is one registered method and path pattern, in net/http ServeMux syntax (which is also
// OpenAPI's path-template syntax for the simple {name} segments Kassa uses).
type Route struct {
	Method  string
	Pattern string
}

// Router dispatches requests with an http.ServeMux. A trailing slash is optional on every route;
// an unknown path is a 404 and a known path with another method a 405 with Allow, both as JSON,
// except under the prefix of a browser's pages (Pages), which answers them in HTML (Allow kept).
type Router struct {
	mux    *http.ServeMux
	routes []Route
	pages  *pages
}

// pages are a browser's pages under prefix, which answer their own errors in HTML.
type pages struct {
	prefix               string
	notFound, notAllowed http.Handler
	crashed              func(w http.ResponseWriter, r *http.Request, recovered any)
}

// Pages makes the paths under prefix (prefix itself and every path below it) a browser's pages, whose
// errors are never the API's JSON: an unknown path there is answered by notFound, a known path with
// another method by notAllowed (called with the status 405 still to write, and Allow already set in
// the header), and a panic in one of their handlers, before the handler has begun its answer, by
// crashed with the value recovered (it is crashed's to log it). A panic after the answer has begun is
// left to the Middleware, which logs it. Only one prefix is held; a second call replaces the first.
func (rt *Router) Pages(prefix string, notFound, notAllowed http.Handler, crashed func(w http.ResponseWriter, r *http.Request, recovered any)) {
	rt.pages = &pages{prefix: prefix, notFound: notFound, notAllowed: notAllowed, crashed: crashed}
}

// under reports whether path is one of the pages'.
func (p *pages) under(path string) bool {
	return p != nil && (path == p.prefix || strings.HasPrefix(path, p.prefix+"/"))
}

// NewRouter returns an empty router.
func NewRouter() *Router { return &Router{mux: http.NewServeMux()} }

// Handle registers h for method and pattern. The pattern has no trailing slash.
func (rt *Router) Handle(method, pattern string, h http.Handler) {
	rt.routes = append(rt.routes, Route{Method: method, Pattern: pattern})
	rt.mux.Handle(method+" "+pattern, matched{h})
}

// HandleFunc registers f for method and pattern.
func (rt *Router) HandleFunc(method, pattern string, f http.HandlerFunc) {
	rt.Handle(method, pattern, f)
}

// Routes lists every registered route, sorted by pattern then method.
func (rt *Router) Routes() []Route {
	out := append([]Route(nil), rt.routes...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pattern != out[j].Pattern {
			return out[i].Pattern < out[j].Pattern
		}
		return out[i].Method < out[j].Method
	})
	return out
}

func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// "A trailing slash on any path is optional" (wire-contract.md, General rules).
	if p := r.URL.Path; len(p) > 1 && p[len(p)-1] == '/' {
		r.URL.Path = p[:len(p)-1]
		if rp := r.URL.RawPath; len(rp) > 1 && rp[len(rp)-1] == '/' {
			r.URL.RawPath = rp[:len(rp)-1]
		}
	}
	// The mux answers unmatched requests itself, in plain text. The probe lets a matched handler
	// through untouched and catches the mux's own answer, so that the route is matched only once.
	page := rt.pages.under(r.URL.Path)
	if page {
		sw := &startWriter{ResponseWriter: w}
		w = sw
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler || sw.started {
					panic(v)
				}
				rt.pages.crashed(sw.ResponseWriter, r, v)
			}
		}()
	}
	p := &probe{ResponseWriter: w}
	rt.mux.ServeHTTP(p, r)
	if p.matched {
		return
	}
	switch {
	case page && p.code == http.StatusNotFound:
		rt.pages.notFound.ServeHTTP(w, r)
	case page && p.code == http.StatusMethodNotAllowed:
		rt.pages.notAllowed.ServeHTTP(w, r)
	case p.code == http.StatusMethodNotAllowed:
		WriteError(w, r, fault.New(http.StatusMethodNotAllowed, "method_not_allowed",
			"%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, w.Header().Get("Allow")))
	case p.code >= 300 && p.code < 400:
		w.WriteHeader(p.code) // the mux's redirect to a cleaned path; Location is already set
	default:
		WriteError(w, r, fault.NotFound("no route for %s %s", r.Method, r.URL.Path))
	}
}

// startWriter records whether the answer has begun.
type startWriter struct {
	http.ResponseWriter
	started bool
}

func (s *startWriter) WriteHeader(code int) {
	s.started = true
	s.ResponseWriter.WriteHeader(code)
}

func (s *startWriter) Write(b []byte) (int, error) {
	s.started = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *startWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// matched marks that a registered handler, not the mux's fallback, answers the request.
type matched struct{ h http.Handler }

func (m matched) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := w.(*probe); ok {
		p.matched = true
		w = p.ResponseWriter
	}
	m.h.ServeHTTP(w, r)
}

// probe records the status the mux's fallback writes and discards its plain-text body.
type probe struct {
	http.ResponseWriter
	matched bool
	code    int
}

func (p *probe) WriteHeader(code int)        { p.code = code }
func (p *probe) Write(b []byte) (int, error) { return len(b), nil }

package httpapi

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/metrics"
)

type (
	requestIDKey struct{}
	loggerKey    struct{}
)

// Logger returns the logger of the request that ctx belongs to, or slog.Default outside a request.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// RequestID returns the id of the request that ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps h so that every record logged with a request's context carries its request_id.
func LogHandler(h slog.Handler) slog.Handler { return ridHandler{h} }

type ridHandler struct{ slog.Handler }

func (h ridHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h ridHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ridHandler{h.Handler.WithAttrs(as)}
}
func (h ridHandler) WithGroup(g string) slog.Handler { return ridHandler{h.Handler.WithGroup(g)} }

// Middleware gives every request an id (returned as the Request-Id header and added to its log
// records), limits its body to MaxBody, turns a panic into a logged 500, and writes one access-log
// line. The line names the route pattern, never the raw URL: a query string may carry a secret. The
// request is counted in m (nil: metrics are off) under the same pattern.
func Middleware(log *slog.Logger, m *metrics.Set, next http.Handler) http.Handler {
	prefix := rand.Text()[:8]
	var seq atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := prefix + "-" + strconv.FormatUint(seq.Add(1), 36)
		w.Header().Set("Request-Id", id)
		ctx := context.WithValue(context.WithValue(r.Context(), requestIDKey{}, id), loggerKey{}, log)
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(ctx, "panic in handler", "route", r.Pattern, "panic", p, "stack", string(debug.Stack()))
				if sw.status == 0 {
					WriteError(sw, r, fault.New(http.StatusInternalServerError, "internal_error",
						"Something went wrong on our side; the request id identifies it in our logs."))
				}
			}
			took := time.Since(start)
			log.LogAttrs(ctx, slog.LevelInfo, "request",
				slog.String("method", r.Method),
				slog.String("route", r.Pattern),
				slog.Int("status", sw.status),
				slog.Int64("bytes", sw.bytes),
				slog.Float64("ms", float64(took.Microseconds())/1000))
			m.Request(r.Pattern, sw.status, took, w.Header())
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
		s.noStore()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
		s.noStore()
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

// noStore marks a JSON answer "Cache-Control: no-store" (RFC 9111 §5.2.2.5) unless its handler set a
// policy of its own: every JSON answer of the API is one account's data or says something about a
// credential, and no cache on the way may keep it. It is done here, where every answer passes, so that
// none is missed: not WriteJSON's, nor the router's 404 and 405, nor a stored idempotent replay.
func (s *statusWriter) noStore() {
	h := s.ResponseWriter.Header()
	if h.Get("Cache-Control") == "" && strings.HasPrefix(h.Get("Content-Type"), "application/json") {
		h.Set("Cache-Control", "no-store")
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/server/servertest"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestReadiness(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	srv, err := server.New(context.Background(), server.Config{DB: db, Logger: slog.New(slog.DiscardHandler), KEK: servertest.NewKEK(t),
		Wrap: apitest.Middleware(t)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var body map[string]any
		json.NewDecoder(rec.Body).Decode(&body)
		return rec.Code, body
	}
	if code, body := get("/readyz"); code != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("readyz with a database: %d %v", code, body)
	}
	db.Close()
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body["error"] != "not_ready" {
		t.Fatalf("readyz without a database: %d %v", code, body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("healthz without a database: %d %v", code, body)
	}
}

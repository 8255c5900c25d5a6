package server_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kassapay/kassa/api"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestOpenAPIMatchesRoutes fails when a registered route is missing from api/openapi.yaml, or when the
// file lists a route the server does not serve; and when an operation lacks a documented response or
// refers to a component that does not exist.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI    string                               `yaml:"openapi"`
		Paths      map[string]map[string]map[string]any `yaml:"paths"`
		Components map[string]map[string]any            `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q, want 3.1.0", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			if _, ok := op["responses"].(map[string]any); !ok {
				t.Errorf("%s %s documents no responses", method, path)
			}
		}
	}
	srv, err := server.New(context.Background(), server.Config{DB: storetest.SQLite(t)})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range srv.Routes() {
		served[r.Method+" "+r.Pattern] = true
	}
	var missing, extra []string
	for r := range served {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !served[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes the server registers but openapi.yaml does not describe:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("routes openapi.yaml describes but the server does not serve:\n  %s", strings.Join(extra, "\n  "))
	}
	// Every $ref points at a component that exists.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					ref, _ := x.(string)
					parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
					if len(parts) != 2 || doc.Components[parts[0]][parts[1]] == nil {
						t.Errorf("dangling $ref %q", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var all map[string]any
	yaml.Unmarshal(api.OpenAPI, &all)
	walk(all)
}

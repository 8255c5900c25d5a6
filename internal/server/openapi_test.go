package server_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/server/servertest"

	"gopkg.in/yaml.v3"

	"github.com/kassapay/kassa/api"
	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// TestOpenAPIMatchesRoutes fails when a registered route is missing from api/openapi.yaml, or when the
// file lists a route the server does not serve; and when an operation lacks a documented response or
// refers to a component that does not exist.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI    string                    `yaml:"openapi"`
		Paths      map[string]map[string]any `yaml:"paths"`
		Components map[string]map[string]any `yaml:"components"`
		Extra      map[string]any            `yaml:",inline"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi version %q, want 3.1.0", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method, v := range item {
			op, isOp := v.(map[string]any)
			if !isOp || method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			if rs, ok := op["responses"].(map[string]any); !ok || len(rs) == 0 {
				t.Errorf("%s %s documents no responses", method, path)
			}
			if ps, ok := op["parameters"]; ok {
				if _, ok := ps.([]any); !ok {
					t.Errorf("%s %s: parameters must be a list", method, path)
				}
			}
			for name := range pathParams(path) {
				if !declares(op["parameters"], name, doc.Components["parameters"]) && !declares(item["parameters"], name, doc.Components["parameters"]) {
					t.Errorf("%s %s does not declare its path parameter %s", method, path, name)
				}
			}
		}
	}
	srv, err := server.New(context.Background(), server.Config{DB: storetest.SQLite(t), Logger: slog.New(slog.DiscardHandler), KEK: servertest.NewKEK(t)})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range srv.Routes() {
		if apitest.Undescribed(r) {
			continue
		}
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
				// A null value is almost always a comma inside an unquoted flow-mapping value that
				// YAML read as a key of its own.
				if x == nil {
					t.Errorf("key %q has no value (an unquoted comma?)", k)
				}
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

// pathParams returns the {name} segments of an OpenAPI path.
func pathParams(path string) map[string]bool {
	out := map[string]bool{}
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out[strings.Trim(seg, "{}")] = true
		}
	}
	return out
}

// declares reports whether a parameter list declares the path parameter name, directly or through a
// $ref to components/parameters.
func declares(params any, name string, components map[string]any) bool {
	list, _ := params.([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = components[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
		}
		if m["in"] == "path" && m["name"] == name && m["required"] == true {
			return true
		}
	}
	return false
}

// TestOpenAPIIsValid checks api/openapi.yaml with a real OpenAPI 3.1 validator (Redocly's CLI, pinned,
// run through npx).
func TestOpenAPIIsValid(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npx"); err != nil {
		storetest.Unavailable(t, "npx (Node.js) is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npx", "-y", "@redocly/cli@2.77.0", "lint", "--format", "stylish", "../../api/openapi.yaml")
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "ENOTFOUND") || strings.Contains(string(out), "EAI_AGAIN") {
			storetest.Unavailable(t, "npx could not fetch @redocly/cli: %s", lastLine(out))
		}
		t.Fatalf("api/openapi.yaml is not valid OpenAPI:\n%s", out)
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestOpenAPIListsEveryEvent fails when the webhooks of api/openapi.yaml are not exactly the event
// types an endpoint may subscribe to, in their order, then the test event a merchant sends to one
// endpoint: a type Kassa sends that the document does not describe is one a receiver cannot expect.
func TestOpenAPIListsEveryEvent(t *testing.T) {
	t.Parallel()
	var doc struct {
		Webhooks yaml.Node `yaml:"webhooks"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var documented []string
	for i := 0; i+1 < len(doc.Webhooks.Content); i += 2 {
		documented = append(documented, doc.Webhooks.Content[i].Value)
	}
	want := append(slices.Clone(event.Types), event.WebhookEndpointPing)
	if !slices.Equal(documented, want) {
		t.Errorf("openapi.yaml's webhooks:\n  %s\nwant the event types, in order:\n  %s", strings.Join(documented, " "), strings.Join(want, " "))
	}
}

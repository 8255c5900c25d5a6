package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// secretKind is a connector whose configuration has a secret: {"host", "secret", "test"}. The binary
// has no such kind, so these tests run the command line in-process, with it among the connectors.
type secretKind struct{}

func (secretKind) Name() string { return "secretive" }

func (secretKind) Parse(config []byte) (processor.Settings, error) {
	var c struct {
		Host, Secret string
		Test         bool
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return processor.Settings{}, errors.New("it must be a JSON object")
	}
	for name, v := range map[string]string{"host": c.Host, "secret": c.Secret} {
		if v == "" {
			return processor.Settings{}, errors.New(name + " is required")
		}
	}
	return processor.Settings{Test: c.Test, Fields: map[string]string{"host": c.Host}}, nil
}

func (secretKind) Open([]byte) (processor.Processor, error) {
	return simulator.New(simulator.Config{}), nil
}

// "kassa merchant update --processor": a configuration that lacks a field is refused naming it; one
// that is complete is stored sealed and printed back without its secret; "--processor simulator"
// goes back to the simulator.
func TestMerchantUpdateProcessor(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir, key := t.TempDir(), filepath.Join(t.TempDir(), "vault.key")
			if err := os.WriteFile(key, []byte(envelope.NewKEKText()), 0o600); err != nil {
				t.Fatal(err)
			}
			where := []string{"--data-dir", dir, "--vault-key-file", key}
			open := func() *store.DB { return storetest.SQLiteAt(t, dir) }
			if backend == "postgres" {
				url := storetest.PostgresURL(t)
				where = []string{"--database-url", url, "--vault-key-file", key}
				open = func() *store.DB {
					db, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					return db
				}
			}
			kassa := func(args ...string) (map[string]any, string, int) {
				var stdout, stderr bytes.Buffer
				code := run(append(args, where...), func(*store.DB, *slog.Logger) []processor.Kind { return []processor.Kind{secretKind{}} }, &stdout, &stderr)
				for _, out := range []string{stdout.String(), stderr.String()} {
					if strings.Contains(out, "Hush") {
						t.Fatalf("kassa %s printed the secret: %s", strings.Join(args, " "), out)
					}
				}
				var printed map[string]any
				if code == 0 {
					if err := json.Unmarshal(stdout.Bytes(), &printed); err != nil {
						t.Fatalf("kassa %s printed %q: %v", strings.Join(args, " "), stdout.String(), err)
					}
				} else if stdout.Len() > 0 {
					t.Fatalf("a failure printed on stdout: %q", stdout.String())
				}
				return printed, stderr.String(), code
			}
			config := func(text string) string {
				f, err := os.CreateTemp(t.TempDir(), "*.json")
				if err == nil {
					_, err = f.WriteString(text)
					f.Close()
				}
				if err != nil {
					t.Fatal(err)
				}
				return f.Name()
			}
			created, stderr, _ := kassa("merchant", "create", "--init", "--name", "Shop", "--email", "shop@example.com")
			m, _ := created["merchant_id"].(string)
			if m == "" {
				t.Fatalf("merchant create: %s", stderr)
			}

			if _, stderr, code := kassa("merchant", "update", "--merchant-id", m, "--processor", "secretive",
				"--processor-config", config(`{"host":"acquirer.example:9583"}`)); code != 1 ||
				stderr != "kassa merchant update: the secretive configuration: secret is required\n" {
				t.Fatalf("a configuration without its secret: exit %d, %q", code, stderr)
			}
			if _, stderr, code := kassa("merchant", "update", "--merchant-id", m, "--processor", "paypal"); code != 1 ||
				!strings.Contains(stderr, `processor must be one of secretive, simulator, not "paypal"`) {
				t.Fatalf("an unknown processor: exit %d, %q", code, stderr)
			}

			printed, stderr, code := kassa("merchant", "update", "--merchant-id", m, "--processor", "secretive",
				"--processor-config", config(`{"host":"acquirer.example:9583","secret":"sk_live_HushHushHush","test":false}`))
			p, _ := printed["processor"].(map[string]any)
			if code != 0 || p["name"] != "secretive" || p["test"] != false || !strings.HasPrefix(p["account"].(string), "pa_") ||
				len(p) != 4 || len(p["settings"].(map[string]any)) != 1 || p["settings"].(map[string]any)["host"] != "acquirer.example:9583" {
				t.Fatalf("merchant update --processor secretive: exit %d, printed %v, %s", code, printed, stderr)
			}
			if printed, _, _ := kassa("merchant", "update", "--merchant-id", m, "--max-amount", "100.00"); printed["processor"].(map[string]any)["account"] != p["account"] {
				t.Fatalf("an update of something else printed the processor %v", printed["processor"])
			}
			storetest.NotStored(t, storetest.RawData(t, open()), map[string]string{"the account's secret": "sk_live_HushHushHush"})
			// The locale the merchant's amounts are read in, beside its processor: a supported one is kept
			// and printed, any other refused by name.
			if printed, stderr, code := kassa("merchant", "update", "--merchant-id", m, "--locale", "fr-CA"); code != 0 || printed["locale"] != "fr-CA" {
				t.Fatalf("merchant update --locale fr-CA: exit %d, printed %v, %s", code, printed, stderr)
			}
			if _, stderr, code := kassa("merchant", "update", "--merchant-id", m, "--locale", "tlh-QO"); code != 1 || !strings.Contains(stderr, "locale must be one of") {
				t.Fatalf("an unsupported locale: exit %d, %q", code, stderr)
			}

			printed, stderr, code = kassa("merchant", "update", "--merchant-id", m, "--processor", "simulator")
			if code != 0 || fmt.Sprint(printed["processor"]) != "map[name:simulator settings:map[] test:true]" {
				t.Fatalf("merchant update --processor simulator: exit %d, printed %v, %s", code, printed, stderr)
			}
		})
	}
}

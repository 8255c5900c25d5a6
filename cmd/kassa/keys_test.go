package main_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestCardEncryptionKeyCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "keys@example.com", "--data-dir", dir)
	id := m["merchant_id"].(string)

	stdout, stderr, code := cli(t, "merchant", "keys", "--merchant-id", id, "--data-dir", dir)
	if code != 0 {
		t.Fatalf("merchant keys: %d %s", code, stderr)
	}
	// The first command that needs the key-encryption key generates it next to the database, says so,
	// as information rather than a warning, and keeps it private.
	if !strings.Contains(stderr, "kassa: generated a key-encryption key") || strings.Contains(stderr, "warning") {
		t.Fatalf("no note about the generated key, or one that reads as a warning: %q", stderr)
	}
	fi, err := os.Stat(filepath.Join(dir, "vault.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("vault.key: %v %v", fi, err)
	}
	k := decodeOne(t, stdout)
	pemText, err := hex.DecodeString(k["public_encryption_key"].(string))
	if err != nil || !strings.HasPrefix(string(pemText), "-----BEGIN PUBLIC KEY-----") {
		t.Fatalf("public_encryption_key is not the hex of a PEM public key: %v", k)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(k["key_id"].(string)) || k["created_at"].(float64) <= 0 ||
		!regexp.MustCompile(`^/js/card-encryption\.[0-9a-f]{16}\.js$`).MatchString(k["script_path"].(string)) ||
		!strings.HasPrefix(k["script_integrity"].(string), "sha384-") {
		t.Fatalf("merchant keys printed %v", k)
	}
	again := cliJSON(t, "merchant", "keys", "--merchant-id", id, "--data-dir", dir)
	if again["key_id"] != k["key_id"] {
		t.Fatal("merchant keys made a second pair")
	}

	r := cliJSON(t, "keys", "rotate", "--merchant-id", id, "--grace", "48h", "--data-dir", dir)
	if r["key_id"] == k["key_id"] || r["previous_key_expires_at"].(float64)-r["created_at"].(float64) != 48*3600*1000 {
		t.Fatalf("keys rotate printed %v", r)
	}
	if now := cliJSON(t, "merchant", "keys", "--merchant-id", id, "--data-dir", dir); now["key_id"] != r["key_id"] {
		t.Fatal("the rotated pair is not current")
	}

	for _, tc := range []struct {
		args []string
		env  string
		code int
		msg  string
	}{
		{[]string{"merchant", "keys"}, "", 2, "--merchant-id is required"},
		{[]string{"merchant", "keys", "--merchant-id", "0000000000"}, "", 1, "no merchant"},
		{[]string{"keys", "rotate", "--merchant-id", id, "--grace", "-1h"}, "", 2, "--grace"},
		{[]string{"merchant", "keys", "--merchant-id", id}, "KASSA_VAULT_KEY=" + envelope.NewKEKText(), 1, "another key-encryption key"},
		{[]string{"merchant", "keys", "--merchant-id", id}, "KASSA_VAULT_KEY=nonsense", 1, "64 hex characters"},
	} {
		cmd := append(tc.args, "--data-dir", dir)
		stdout, stderr, code := cliEnv(t, []string{tc.env}, cmd...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
			t.Errorf("%v %s: exit %d, %q; want %d mentioning %q", tc.args, tc.env, code, stderr, tc.code, tc.msg)
		}
	}
}

// PostgreSQL serves several nodes, which must share the key-encryption key: it is never generated.
func TestPostgresNeedsAVaultKey(t *testing.T) {
	t.Parallel()
	url := storetest.PostgresURL(t)
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"merchant", "keys", "--merchant-id", "0000000000"}} {
		_, stderr, code := cliEnv(t, nil, append(args, "--database-url", url)...)
		if code != 1 || !strings.Contains(stderr, "PostgreSQL needs --vault-key-file or KASSA_VAULT_KEY") {
			t.Errorf("%v without a key: exit %d, %q", args, code, stderr)
		}
	}
}

func TestRotateVaultKeyWhileServing(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := dbArgs(t, backend)
			m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Vault Shop", "--email", "vault@example.com"}, db...)...)
			srv := startServer(t, nil, db...)
			tok := token(t, srv.url, m)
			cust := callJSON(t, "POST", srv.url+"/customer-service/customer", tok, `{"email":"ada@example.com"}`)
			c := cust["lookup_id"].(string)
			stored := callJSON(t, "POST", srv.url+"/customer-service/customer/"+c+"/card", tok,
				`{"card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"30"}`)
			if len(stored["cards"].([]any)) != 1 {
				t.Fatalf("store a card: %v", stored)
			}
			pay := func(base, tok string) map[string]any {
				return callJSON(t, "POST", base+"/transaction-service/sale/customer/"+c, tok, `{"amount":"5.00"}`)
			}
			oldKey := readKey(t, db)

			newFile := filepath.Join(t.TempDir(), "new-vault.key")
			out := cliJSON(t, append([]string{"keys", "rotate-vault", "--new-vault-key-file", newFile}, db...)...)
			if out["old_kek_id"] == out["new_kek_id"] || out["data_keys_rewrapped"].(float64) < 1 {
				t.Fatalf("rotate-vault printed %v", out)
			}
			if r := pay(srv.url, tok); r["transaction_result"] != "APPROVED" {
				t.Fatalf("a stored card while the key changes: %v", r)
			}
			srv.stop(t)

			// Restart on the new key: for SQLite it replaced the generated one in the data directory;
			// for PostgreSQL the operator passes the new file.
			restart := db
			if backend == "postgres" {
				restart = append([]string{}, db...)
				restart[len(restart)-1] = newFile
			}
			srv = startServer(t, nil, restart...)
			tok = token(t, srv.url, m)
			if r := pay(srv.url, tok); r["transaction_result"] != "APPROVED" {
				t.Fatalf("a stored card after the restart: %v", r)
			}
			srv.stop(t)

			_, stderr, code := cliEnv(t, []string{"KASSA_VAULT_KEY=" + oldKey}, append([]string{"serve", "--addr", "127.0.0.1:0"}, db...)...)
			if code != 1 || !strings.Contains(stderr, "another key-encryption key") {
				t.Fatalf("serve with the old key: exit %d, %s", code, stderr)
			}
		})
	}
}

// readKey returns the key-encryption key text of a test database: the --vault-key-file, or the
// generated vault.key of the data directory.
func readKey(t *testing.T, db []string) string {
	t.Helper()
	path := flagValue(db, "--vault-key-file")
	if path == "" {
		path = filepath.Join(flagValue(db, "--data-dir"), "vault.key")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

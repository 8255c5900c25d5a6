package main_test

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// storedCard is a customer's card in the vault, and the card number the simulator decides its
// payments by: an approved one, or one declined for insufficient funds.
type storedCard struct {
	customer, card, number string
}

// Back up under sale load, restore, start, and every transaction approved before the backup began is
// there and every stored card still decrypts. A running kassa serve takes sales
// and stores cards from concurrent clients over HTTP while kassa backup copies its database; the copy
// is restored into a fresh directory with the vault key, and a server started on it finds every sale
// approved before the backup began, and pays with every card stored before it. A stored card that the
// simulator declines for insufficient funds is declined for that reason: its number decrypted as it
// was stored, not merely into something.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Backup Shop", "--email", "backup@example.com", "--data-dir", dir)
	srv := startServer(t, nil, "--data-dir", dir)
	tok := token(t, srv.url, m)

	var (
		mu       sync.Mutex
		approved []string     // sales approved so far, in the order their answers arrived
		cards    []storedCard // cards stored so far
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	stopSales := clients(t, 4, func(w, i int) {
		sale, err := callRaw(srv.url, tok, "/transaction-service/sale", fmt.Sprintf(
			`{"amount":"%d.%02d","card_number":"%s","card_expiry_month":12,"card_expiry_year":30,"cvv2":"123"}`, 1+w, i%100, cardtest.Visa), "")
		if err != nil || sale["transaction_result"] != "APPROVED" {
			fail("sale: %v %v", sale, err)
			return
		}
		mu.Lock()
		approved = append(approved, sale["transaction_id"].(string))
		mu.Unlock()
	})
	stopCards := clients(t, 1, func(_, i int) { // a fifth client stores cards meanwhile
		number := cardtest.Mastercard
		if i%2 == 1 {
			number = cardtest.InsufficientFunds
		}
		c, err := callRaw(srv.url, tok, "/customer-service/customer", fmt.Sprintf(`{"email":"c%d@example.com"}`, i), "")
		id, _ := c["lookup_id"].(string)
		if err != nil || id == "" {
			fail("customer: %v %v", c, err)
			return
		}
		saved, err := callRaw(srv.url, tok, "/customer-service/customer/"+id+"/card",
			`{"card_number":"`+number+`","card_expiry_month":12,"card_expiry_year":2099}`, "")
		list, _ := saved["cards"].([]any)
		if err != nil || len(list) != 1 {
			fail("card: %v %v", saved, err)
			return
		}
		mu.Lock()
		cards = append(cards, storedCard{id, list[0].(map[string]any)["lookup_id"].(string), number})
		mu.Unlock()
	})
	// progress is how many sales and cards have been approved and stored so far.
	progress := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(approved), len(cards)
	}
	eventually(t, "sales and stored cards under way", 60*time.Second, func() bool {
		sales, stored := progress()
		return sales >= 40 && stored >= 4
	})

	mu.Lock()
	salesBefore, cardsBefore := slices.Clone(approved), slices.Clone(cards)
	mu.Unlock()
	out := filepath.Join(t.TempDir(), "kassa-backup.db")
	started := time.Now()
	b := cliJSON(t, "backup", "--out", out, "--data-dir", dir)
	took := time.Since(started)
	salesDuring, _ := progress()
	salesDuring -= len(salesBefore)
	// The server keeps taking sales after the backup, as during it.
	eventually(t, "sales after the backup", 30*time.Second, func() bool {
		sales, _ := progress()
		return sales >= len(salesBefore)+salesDuring+10
	})
	stopSales()
	stopCards()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed under the backup, the first: %s", len(failures), failures[0])
	}
	t.Logf("backup of %d bytes in %v, while %d sales were approved", int64(b["bytes"].(float64)), took, salesDuring)

	key := filepath.Join(dir, "vault.key")
	text, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	kek, err := envelope.ParseKEK(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if b["integrity_check"] != "ok" || b["backup"] != out || b["transactions"].(float64) < float64(len(salesBefore)) ||
		fmt.Sprint(b["vault_key_ids"]) != "["+kek.ID+"]" {
		t.Fatalf("kassa backup printed %v", b)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, %v; want mode 0600", st, err)
	}

	fresh := filepath.Join(t.TempDir(), "restored") // made by restore
	r := cliJSON(t, "restore", "--from", out, "--data-dir", fresh, "--vault-key-file", key)
	if r["integrity_check"] != "ok" || r["database"] != filepath.Join(fresh, "kassa.db") || r["data_keys_checked"].(float64) < 1 ||
		r["transactions"] != b["transactions"] {
		t.Fatalf("kassa restore printed %v", r)
	}

	restored := startServer(t, nil, "--data-dir", fresh, "--vault-key-file", key)
	tok = token(t, restored.url, m)
	there := map[string]string{}
	for _, tx := range callJSON(t, "GET", restored.url+"/transaction-service/transaction?limit=10000", tok, "")["entities"].([]any) {
		tx := tx.(map[string]any)
		there[tx["transaction_id"].(string)], _ = tx["transaction_result"].(string)
	}
	for _, id := range salesBefore {
		if there[id] != "APPROVED" {
			t.Errorf("sale %s, approved before the backup began, is %q in the restored database", id, there[id])
		}
	}
	for _, c := range cardsBefore {
		pay := call(t, restored.url, tok, "/customer-service/customer/"+c.customer+"/card/"+c.card, `{"amount":"3.00","currency":"CAD"}`, "")
		want := "APPROVED"
		if c.number == cardtest.InsufficientFunds {
			want = "DECLINED insufficient_funds"
		}
		if got := strings.TrimSpace(fmt.Sprint(pay["transaction_result"], " ", orBlank(pay["decline_code"]))); got != want {
			t.Errorf("a payment with the card stored before the backup (%s…): %v; want %s", c.number[:6], pay, want)
		}
	}
	t.Logf("%d sales and %d stored cards made before the backup began found in the restored database", len(salesBefore), len(cardsBefore))
}

// clients runs n concurrent clients, client c calling do(c, i) for i = 0, 1, … until the returned
// function is called (or the test ends), which waits for them to finish.
func clients(t *testing.T, n int, do func(c, i int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
					do(c, i)
				}
			}
		})
	}
	stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// orBlank is v, or "" for nil.
func orBlank(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// kassa restore goes into an empty data directory only (a non-empty one is refused), verifies the
// file first and leaves no partial database on failure; on PostgreSQL, kassa backup says plainly to
// use PostgreSQL's own tools (pg_dump, pg_basebackup) rather than pretend.
func TestBackupAndRestoreRefuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Careful Shop", "--email", "careful@example.com", "--data-dir", dir)
	cliJSON(t, "merchant", "keys", "--merchant-id", m["merchant_id"].(string), "--data-dir", dir) // makes vault.key and a data key
	key := filepath.Join(dir, "vault.key")
	good := filepath.Join(t.TempDir(), "good.db")
	cliJSON(t, "backup", "--out", good, "--data-dir", dir)
	// A second backup to the same name replaces the first.
	if b := cliJSON(t, "backup", "--out", good, "--data-dir", dir); b["integrity_check"] != "ok" {
		t.Fatalf("a backup over a previous one: %v", b)
	}
	otherKey := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(otherKey, []byte(envelope.NewKEKText()), 0o600); err != nil {
		t.Fatal(err)
	}
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string, b []byte) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// damaged: a page overwritten from its header on, as a bad disk or a torn copy would: the root page
	// of a table, found by name, so that which page it is does not change with the schema's layout.
	// (SQLite checks a database's structure, not what its rows hold.)
	damaged := slices.Clone(goodBytes)
	var root int
	g, err := sql.Open("sqlite", "file:"+good+"?mode=ro")
	if err == nil {
		err = g.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'data_keys'`).Scan(&root)
		g.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	page := 4096 * (root - 1)
	copy(damaged[page:page+4000], strings.Repeat("\x00\xff", 2000))
	// foreign: a sound SQLite database, but not Kassa's.
	foreignDB := filepath.Join(t.TempDir(), "foreign.db")
	foreign, err := sql.Open("sqlite", "file:"+foreignDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	foreign.Close()

	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyOnly := t.TempDir()
	if err := os.WriteFile(filepath.Join(keyOnly, "vault.key"), []byte(envelope.NewKEKText()), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := func() string { return filepath.Join(t.TempDir(), "data") }
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		msg     []string
		dataDir string // restore's, checked to be as it was
	}{
		{"backup on PostgreSQL", []string{"backup", "--out", "x.db", "--database-url", "postgres://kassa@127.0.0.1:1/kassa"}, 2, []string{"pg_dump", "pg_basebackup"}, ""},
		{"restore on PostgreSQL", []string{"restore", "--from", good, "--database-url", "postgres://kassa@127.0.0.1:1/kassa"}, 2, []string{"pg_restore"}, ""},
		{"backup without --out", []string{"backup", "--data-dir", dir}, 2, []string{"--out is required"}, ""},
		{"backup without a database", []string{"backup", "--out", filepath.Join(t.TempDir(), "x.db"), "--data-dir", fresh()}, 1, []string{"no Kassa database at", "kassa.db"}, ""},
		{"backup over the database", []string{"backup", "--out", filepath.Join(dir, "kassa.db"), "--data-dir", dir}, 1, []string{"the database itself"}, ""},
		{"backup over its journal", []string{"backup", "--out", filepath.Join(dir, "kassa.db-wal"), "--data-dir", dir}, 1, []string{"the database itself"}, ""},
		{"backup with --init", []string{"backup", "--init", "--out", "x.db", "--data-dir", dir}, 2, []string{"-init"}, ""},
		{"restore without --from", []string{"restore", "--vault-key-file", key}, 2, []string{"--from is required"}, ""},
		{"restore into a non-empty directory", []string{"restore", "--from", good, "--vault-key-file", key}, 1, []string{"not empty", "notes.txt"}, nonEmpty},
		{"restore into the server's own directory", []string{"restore", "--from", good}, 1, []string{"not empty", "kassa.db"}, dir},
		{"restore of a missing file", []string{"restore", "--from", filepath.Join(t.TempDir(), "none.db"), "--vault-key-file", key}, 1, []string{"none.db"}, fresh()},
		{"restore of a file that is not a database", []string{"restore", "--from", file("text.db", []byte("SQLite format 3\x00, or so it says")), "--vault-key-file", key}, 1, []string{"integrity_check failed", "not a database"}, fresh()},
		{"restore of a damaged backup", []string{"restore", "--from", file("damaged.db", damaged), "--vault-key-file", key}, 1, []string{"integrity_check failed", "malformed"}, fresh()},
		{"restore of another program's database", []string{"restore", "--from", foreignDB, "--vault-key-file", key}, 1, []string{"not a Kassa database"}, fresh()},
		{"restore without the vault key", []string{"restore", "--from", good}, 1, []string{"--vault-key-file", "vault.key"}, fresh()},
		{"restore with another vault key", []string{"restore", "--from", good, "--vault-key-file", otherKey}, 1, []string{"vault_key_ids", "does not open"}, fresh()},
		{"restore with another vault.key in the directory", []string{"restore", "--from", good}, 1, []string{"does not open"}, keyOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			var before []string
			if tc.dataDir != "" {
				args = append(args, "--data-dir", tc.dataDir)
				before = entries(t, tc.dataDir)
			}
			stdout, stderr, code := cli(t, args...)
			if code != tc.code || stdout != "" || strings.Count(strings.TrimSpace(stderr), "\n") > 0 && code == 1 {
				t.Fatalf("exit %d, %q %q; want exit %d and one line on stderr", code, stdout, stderr, tc.code)
			}
			for _, msg := range tc.msg {
				if !strings.Contains(stderr, msg) {
					t.Errorf("stderr %q does not mention %q", stderr, msg)
				}
			}
			if tc.dataDir != "" {
				if after := entries(t, tc.dataDir); !slices.Equal(after, before) {
					t.Errorf("the data directory held %v, and after a failed restore %v", before, after)
				}
			}
		})
	}
	// The database the refused backups named is intact, and a restore into a directory holding only the
	// right vault.key works.
	cliJSON(t, "backup", "--out", filepath.Join(t.TempDir(), "again.db"), "--data-dir", dir)
	withKey := t.TempDir()
	if err := os.Link(key, filepath.Join(withKey, "vault.key")); err != nil {
		t.Fatal(err)
	}
	if r := cliJSON(t, "restore", "--from", good, "--data-dir", withKey); r["integrity_check"] != "ok" || r["data_keys_checked"] != 1.0 {
		t.Fatalf("restore beside its vault.key: %v", r)
	}
	if got := entries(t, withKey); fmt.Sprint(got) != "[kassa.db vault.key]" {
		t.Fatalf("the restored directory holds %v", got)
	}
	if l := cliJSON(t, "merchant", "list", "--data-dir", withKey)["merchants"].([]any); len(l) != 1 {
		t.Fatalf("merchants of the restored database: %v", l)
	}
}

// kassa backup --out makes the directory of its file when it is missing, with any missing parent,
// 0700 whatever the umask (here 000), as the data directory is; a directory that exists keeps its
// mode; and a backup that fails leaves none of the directories it made.
func TestBackupMakesItsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cliJSON(t, "merchant", "create", "--init", "--name", "Nested Shop", "--email", "nested@example.com", "--data-dir", dir)

	backups := filepath.Join(t.TempDir(), "backups")
	out := filepath.Join(backups, "daily", "kassa.backup")
	if b, err := umasked("000", "backup", "--data-dir", dir, "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("kassa backup into a missing directory: %v\n%s", err, b)
	}
	storetest.WantPrivate(t, backups, "kassa.backup")

	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	cliJSON(t, "backup", "--out", filepath.Join(shared, "kassa.backup"), "--data-dir", dir)
	if st, err := os.Stat(shared); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("an existing directory of the backup: %v, %v; want it left 0755", st, err)
	}

	// A data directory whose kassa.db is not a database: the copy fails once its directory is made.
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "kassa.db"), []byte("not a database, not even its header"), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	stdout, stderr, code := cli(t, "backup", "--out", filepath.Join(parent, "gone", "deeper", "kassa.backup"), "--data-dir", broken)
	if code != 1 || stdout != "" {
		t.Fatalf("a backup of a broken database: exit %d, %q %q; want 1", code, stdout, stderr)
	}
	if left := entries(t, parent); left != nil {
		t.Fatalf("the failed backup left %v in %s", left, parent)
	}
}

// entries are the names in dir, sorted; nil when dir does not exist.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

// The README's backup and restore commands work as they stand, the paths aside.
func TestREADMEBackup(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		storetest.Unavailable(t, "the README's example needs sh")
	}
	dir, backups, fresh := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "data")
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Readme Shop", "--email", "readme@example.com", "--data-dir", dir)
	cliJSON(t, "merchant", "keys", "--merchant-id", m["merchant_id"].(string), "--data-dir", dir) // makes vault.key
	paths := strings.NewReplacer("bin/kassa", kassaBin, "./kassa-data", dir, "/var/backups/kassa", backups,
		"/srv/kassa-data", fresh, "/etc/kassa/vault.key", filepath.Join(dir, "vault.key"))
	run := func(script string) map[string]any {
		t.Helper()
		out, err := exec.Command("sh", "-e", "-c", script).Output()
		if err != nil {
			t.Fatalf("the README's %q: %v", script, err)
		}
		return decodeOne(t, string(out))
	}
	b := run(paths.Replace(readmetest.Block(t, "<!-- backup:", "sh")))
	if b["integrity_check"] != "ok" || filepath.Dir(b["backup"].(string)) != backups {
		t.Fatalf("the README's backup printed %v", b)
	}
	restore, serve, _ := strings.Cut(strings.TrimSpace(readmetest.Block(t, "To restore, give the backup", "sh")), "\n")
	restore = strings.Replace(restore, "/var/backups/kassa/kassa-2025-01-31.db", b["backup"].(string), 1)
	if r := run(paths.Replace(restore)); r["data_keys_checked"] != 1.0 {
		t.Fatalf("the README's restore printed %v", r)
	}
	args := strings.Fields(paths.Replace(serve))
	if len(args) < 2 || args[0] != kassaBin || args[1] != "serve" {
		t.Fatalf("the README's restore block does not end with kassa serve: %q", serve)
	}
	srv := startServer(t, nil, args[2:]...)
	token(t, srv.url, m) // the restored merchant's client signs in
}

package main_test

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kassapay/kassa/deploy"
	"github.com/kassapay/kassa/internal/envelope"
)

func TestCLIFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Shop", "--email", "taken@example.com", "--data-dir", dir)
	notJSON, emptyObject := filepath.Join(t.TempDir(), "not.json"), filepath.Join(t.TempDir(), "empty.json")
	// The key-encryption key that seals processor configurations, made here rather than with a warning by
	// the first command that needs it.
	if os.WriteFile(notJSON, []byte(`{"latency": 5s}`), 0o600) != nil || os.WriteFile(emptyObject, []byte(`{}`), 0o600) != nil ||
		os.WriteFile(filepath.Join(dir, "vault.key"), []byte(envelope.NewKEKText()), 0o600) != nil {
		t.Fatal("write the processor configurations and the key-encryption key")
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"merchant", "explode"}, 2, "unknown command"},
		{"unknown flag", []string{"merchant", "create", "--init", "--bogus"}, 2, "bogus"},
		{"missing name", []string{"merchant", "create", "--init", "--email", "a@example.com"}, 2, "--name is required"},
		{"missing email", []string{"merchant", "create", "--init", "--name", "A"}, 2, "--email is required"},
		{"stray argument", []string{"merchant", "create", "--init", "--name", "A", "--email", "a@example.com", "extra"}, 2, "unexpected argument"},
		{"bad email", []string{"merchant", "create", "--init", "--name", "A", "--email", "nope"}, 1, "email must be an e-mail address"},
		{"taken email", []string{"merchant", "create", "--init", "--name", "A", "--email", "TAKEN@example.com"}, 1, "already exists"},
		{"bad currency", []string{"merchant", "create", "--init", "--name", "A", "--email", "b@example.com", "--currency", "XYZ"}, 1, "ISO 4217"},
		{"short password", []string{"merchant", "create", "--init", "--name", "A", "--email", "c@example.com", "--password", "short"}, 1, "at least 10"},
		{"client without merchant", []string{"client", "create"}, 2, "--merchant-id is required"},
		{"client for unknown merchant", []string{"client", "create", "--merchant-id", "0000000000"}, 1, "no merchant"},
		{"validity not a duration", []string{"client", "create", "--merchant-id", m["merchant_id"].(string), "--validity", "soon"}, 2, "validity"},
		{"validity out of range", []string{"client", "create", "--merchant-id", m["merchant_id"].(string), "--validity", "1s"}, 2, "--validity must be"},
		{"revoke unknown client", []string{"client", "revoke", "--client-id", "nope"}, 1, "no client"},
		{"update without merchant", []string{"merchant", "update", "--simulator-profile", "payfirma"}, 2, "--merchant-id is required"},
		{"update unknown merchant", []string{"merchant", "update", "--merchant-id", "0000000000"}, 1, "no merchant"},
		{"update to an unknown profile", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--simulator-profile", "lucky"}, 1, "simulator_profile must be"},
		{"update to a bad currency", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--currencies", "CAD,XXX"}, 1, "ISO 4217"},
		{"update to a bad origin", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--allowed-origins", "https://shop.example/pay"}, 1, "is not an origin"},
		{"update to a bad maximum", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--max-amount", "-5"}, 1, "max_amount"},
		{"update to no card declines", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--velocity-card-declines", "0"}, 2, "--velocity-card-declines must be"},
		{"update to a request rate of words", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--velocity-request-rate", "lots"}, 2, "--velocity-request-rate must be"},
		{"update to an unknown processor", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "paypal"}, 1, "processor must be one of"},
		{"processor configuration without a processor", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor-config", emptyObject}, 2, "--processor-config needs --processor"},
		{"processor configuration that is not JSON", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "simulator", "--processor-config", notJSON}, 1, "the simulator configuration is not valid JSON (at byte 14)"},
		{"processor configuration that is not there", []string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "simulator", "--processor-config", notJSON + ".missing"}, 1, "--processor-config: open"},
		{"processor of an unknown merchant", []string{"merchant", "update", "--merchant-id", "0000000000", "--processor", "simulator", "--processor-config", emptyObject}, 1, "no merchant"},
		{"bad simulator latency", []string{"serve", "--simulator-latency", "-1s"}, 2, "--simulator-latency"},
		{"bad database url", []string{"migrate", "--database-url", "mysql://x"}, 1, "postgres://"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, 2, "--log-level"},
		{"bad public url", []string{"serve", "--public-url", "pay.example.com"}, 2, "--public-url"},
		{"code ttl over 10 minutes", []string{"serve", "--auth-code-ttl", "11m"}, 2, "--auth-code-ttl"},
		{"trusted proxies not prefixes", []string{"serve", "--trusted-proxies", "10.0.0.0/8,proxy.internal"}, 2, "--trusted-proxies"},
		{"partner without callback", []string{"partner", "create", "--name", "P", "--image-url", "https://p.example/i.png"}, 2, "--callback-uri is required"},
		{"partner without image", []string{"partner", "create", "--name", "P", "--callback-uri", "https://p.example/cb"}, 2, "--image-url is required"},
		{"partner image over http", []string{"partner", "create", "--name", "P", "--image-url", "http://p.example/i.png", "--callback-uri", "https://p.example/cb"}, 1, "image_url must be an https URL"},
		{"partner callback over http", []string{"partner", "create", "--name", "P", "--image-url", "https://p.example/i.png", "--callback-uri", "http://p.example/cb"}, 1, "must be https"},
		{"partner callback with a fragment", []string{"partner", "create", "--name", "P", "--image-url", "https://p.example/i.png", "--callback-uri", "https://p.example/cb#x"}, 1, "fragment"},
		{"partner validity out of range", []string{"partner", "create", "--name", "P", "--image-url", "https://p.example/i.png", "--callback-uri", "https://p.example/cb", "--token-validity", "1s"}, 1, "token validity"},
		{"revoke-partner without partner", []string{"merchant", "revoke-partner", "--merchant-id", m["merchant_id"].(string)}, 2, "--partner-id is required"},
		{"revoke-partner of an unknown partner", []string{"merchant", "revoke-partner", "--merchant-id", m["merchant_id"].(string), "--partner-id", "0000000000"}, 1, "no partner"},
		{"revoke-partner of an unknown merchant", []string{"merchant", "revoke-partner", "--merchant-id", "0000000000", "--partner-id", "0000000000"}, 1, "no merchant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) >= 2 {
				args = append(args, "--data-dir", dir)
			}
			stdout, stderr, code := cli(t, args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.code, tc.msg)
			}
			if stdout != "" {
				t.Fatalf("a failure printed on stdout: %q", stdout)
			}
			if tc.code == 1 && strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("failure reason is not one line: %q", stderr)
			}
		})
	}
	u := cliJSON(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--simulator-profile", "payfirma",
		"--currencies", "usd,EUR", "--max-amount", "5000.00", "--allowed-origins", "https://Shop.example, http://localhost:3000", "--data-dir", dir)
	if u["simulator_profile"] != "payfirma" || u["max_amount"] != "5000.00" || u["default_currency"] != "CAD" ||
		fmt.Sprint(u["currencies"]) != "[CAD USD EUR]" || fmt.Sprint(u["allowed_origins"]) != "[https://shop.example http://localhost:3000]" {
		t.Fatalf("merchant update printed %v", u)
	}
	if d := cliJSON(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--allowed-origins", "default", "--data-dir", dir); fmt.Sprint(d["allowed_origins"]) != "[]" {
		t.Fatalf("allowed origins back to the default: %v", d["allowed_origins"])
	}
	// Every update says which processor takes the merchant's payments: the simulator by default.
	if p := u["processor"]; fmt.Sprint(p) != "map[name:simulator settings:map[] test:true]" {
		t.Fatalf("merchant update printed the processor %v", p)
	}
	if p := cliJSON(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "simulator", "--processor-config", emptyObject,
		"--data-dir", dir)["processor"]; fmt.Sprint(p) != "map[name:simulator settings:map[] test:true]" {
		t.Fatalf("merchant update --processor simulator printed the processor %v", p)
	}
	// A Stripe account: validated, its key never printed back; a test key makes a test account.
	stripeKey := "sk_test_" + strings.Repeat("s3cr3t", 5)
	stripeConfig := filepath.Join(t.TempDir(), "stripe.json")
	if err := os.WriteFile(stripeConfig, []byte(`{"secret_key":"`+stripeKey+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "stripe",
		"--processor-config", stripeConfig, "--data-dir", dir)
	if code != 0 || strings.Contains(stdout+stderr, "s3cr3t") {
		t.Fatalf("merchant update --processor stripe: exit %d, printed %s %s", code, stdout, stderr)
	}
	if p, _ := decodeOne(t, stdout)["processor"].(map[string]any); p["name"] != "stripe" || p["test"] != true {
		t.Fatalf("merchant update --processor stripe printed the processor %v", p)
	}
	if err := os.WriteFile(stripeConfig, []byte(`{"api_base":"https://api.stripe.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := cli(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "stripe",
		"--processor-config", stripeConfig, "--data-dir", dir); code != 1 || !strings.Contains(stderr, "secret_key") {
		t.Fatalf("a Stripe configuration without its key: exit %d, %s", code, stderr)
	}
	// Velocity limits: each set printed back, in force, beside the defaults of the others.
	v := cliJSON(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--velocity-card-declines", "4",
		"--velocity-credential-declines", "40", "--velocity-intent-failures", "5", "--velocity-sessions", "60", "--velocity-request-rate", "200",
		"--data-dir", dir)["velocity"]
	if fmt.Sprint(v) != "map[card_declines_per_hour:4 credential_declines_per_10_minutes:40 intent_failures_per_hour:5 requests_per_second:200 sessions_per_minute:60]" {
		t.Fatalf("velocity limits printed %v", v)
	}
	v = cliJSON(t, "merchant", "update", "--merchant-id", m["merchant_id"].(string), "--velocity-request-rate", "default", "--data-dir", dir)["velocity"]
	if fmt.Sprint(v) != "map[card_declines_per_hour:4 credential_declines_per_10_minutes:40 intent_failures_per_hour:5 requests_per_second:1000 sessions_per_minute:60]" {
		t.Fatalf("request rate back to the default: %v", v)
	}
	if out := cliJSON(t, "migrate", "--data-dir", dir); out["status"] != "migrated" {
		t.Fatalf("migrate printed %v", out)
	}
}

// kassa version and kassa --version print one line: "kassa", a semantic version — the Go toolchain's
// module version when it stamped one, else the newest release in deploy/releases with "-dev" — and,
// when the binary's build information has the toolchain's VCS stamp, the commit it was built from
// (git's HEAD). A binary built with make build's command is named by the VERSION it passes.
// kassa merchant --help (and every command group) lists its subcommands and exits 0; help text writes
// flags as --flag, as the README does; shared flags (database, vault key) are described once.
func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	bi, err := buildinfo.ReadFile(kassaBin)
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := deploy.NewestRelease() + "-dev"
	if bi.Main.Version != "(devel)" && bi.Main.Version != "" {
		wantVersion = bi.Main.Version
	}
	wantCommit := ""
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			head, err := exec.Command("git", "rev-parse", "HEAD").Output()
			if err != nil {
				t.Fatalf("git rev-parse HEAD: %v", err)
			}
			if s.Value != strings.TrimSpace(string(head)) {
				t.Fatalf("the test binary is stamped with the commit %s, git's HEAD is %s", s.Value, head)
			}
			wantCommit = " (commit " + s.Value
		}
	}
	semver := regexp.MustCompile(`^kassa v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)? \((commit [0-9a-f]{40}[^,]*, )?go1\.[^ ]+\)\n$`)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, code := cli(t, args...)
		if code != 0 || !semver.MatchString(stdout) || !strings.HasPrefix(stdout, "kassa "+wantVersion+" (") ||
			!strings.Contains(stdout, wantCommit) || (wantCommit == "") == strings.Contains(stdout, "commit") {
			t.Errorf("kassa %s: exit %d, printed %q %q; want one line of %s, with the commit only when the binary has one (%q)", args[0], code, stdout, stderr, wantVersion, wantCommit)
		}
	}

	// make build's go build of bin/kassa, as make lists it, into a directory of the test's.
	const named = "v1.2.3-4-gabcdef0"
	recipe := makeDryRun(t, "build", "VERSION="+named)
	var build []string
	for line := range strings.Lines(recipe) {
		if f := strings.Fields(line); slices.Contains(f, "bin/kassa") && f[0] == "go" {
			build = f
		}
	}
	if build == nil {
		t.Fatalf("make build builds no bin/kassa with go:\n%s", recipe)
	}
	built := filepath.Join(t.TempDir(), "kassa")
	build[slices.Index(build, "bin/kassa")] = built
	if out, err := exec.Command("sh", "-c", "cd ../.. && "+strings.Join(build, " ")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build, " "), err, out)
	}
	if out, err := exec.Command(built, "version").Output(); err != nil || !semver.Match(out) || !strings.HasPrefix(string(out), "kassa "+named+" (") {
		t.Errorf("kassa version of make build's binary with VERSION=%s: %v, printed %q", named, err, out)
	}

	top, _, code := cli(t, "--help")
	if code != 0 || !strings.Contains(top, "Shared flags") {
		t.Fatalf("kassa --help: exit %d, %q", code, top)
	}
	var commands []string
	groups := map[string][]string{}
	for _, line := range strings.Split(top, "\n") {
		if !strings.HasPrefix(line, "  kassa ") {
			continue
		}
		var words []string
		for _, w := range strings.Fields(line)[1:] {
			if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
				break
			}
			words = append(words, w)
		}
		commands = append(commands, strings.Join(words, " "))
		if len(words) == 2 {
			groups[words[0]] = append(groups[words[0]], words[1])
		}
	}
	if len(commands) < 20 || len(groups["merchant"]) < 4 {
		t.Fatalf("kassa --help lists %d commands (%v): too few", len(commands), commands)
	}
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for group, subs := range groups {
		stdout, _, code := cli(t, group, "--help")
		if code != 0 {
			t.Errorf("kassa %s --help: exit %d", group, code)
		}
		for _, sub := range subs {
			if !strings.Contains(stdout, "kassa "+group+" "+sub) {
				t.Errorf("kassa %s --help does not list %s:\n%s", group, sub, stdout)
			}
		}
		if _, stderr, code := cli(t, group); code != 2 || !strings.Contains(stderr, "kassa "+group+" "+subs[0]) {
			t.Errorf("kassa %s alone: exit %d, %q; want 2 and its commands", group, code, stderr)
		}
	}
	for _, c := range commands {
		if c == "version" {
			continue
		}
		stdout, stderr, code := cli(t, append(strings.Fields(c), "--help")...)
		if code != 0 || !strings.HasPrefix(stdout, "Usage:\n  kassa "+c) || !strings.Contains(stdout, "Flags:") {
			t.Errorf("kassa %s --help: exit %d, %q %q", c, code, stdout, stderr)
			continue
		}
		if singleDash.MatchString(stdout) {
			t.Errorf("kassa %s --help writes a flag with one dash:\n%s", c, stdout)
		}
		// The shared flags are described in kassa --help only, and named in one note here.
		if strings.Contains(stdout, "KASSA_DATA_DIR") || !strings.Contains(stdout, "--data-dir, --database-url") {
			t.Errorf("kassa %s --help describes the shared flags again, or does not name them:\n%s", c, stdout)
		}
	}
	// A flag of the command itself, with its value's name.
	if stdout, _, _ := cli(t, "merchant", "create", "--init", "--help"); !strings.Contains(stdout, "  --name ") || !strings.Contains(stdout, "  --email ") {
		t.Errorf("kassa merchant create --help:\n%s", stdout)
	}
	// Help after a mistake goes to stderr, with exit 2, as before.
	if stdout, stderr, code := cli(t, "merchant", "create", "--init", "--bogus"); code != 2 || stdout != "" || !strings.Contains(stderr, "  --name ") {
		t.Errorf("kassa merchant create --bogus: exit %d, %q %q", code, stdout, stderr)
	}
}

// kassa merchant list and show, kassa client list --merchant-id, kassa partner list and the other
// list commands answer JSON, and never a secret.
func TestListCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if l := cliJSON(t, "merchant", "list", "--init", "--data-dir", dir); fmt.Sprint(l["merchants"]) != "[]" {
		t.Fatalf("no merchant yet: %v", l)
	}
	a := cliJSON(t, "merchant", "create", "--init", "--name", "Alder", "--email", "alder@example.com", "--data-dir", dir)
	b := cliJSON(t, "merchant", "create", "--init", "--name", "Birch", "--email", "birch@example.com", "--currency", "USD", "--data-dir", dir)
	second := cliJSON(t, "client", "create", "--merchant-id", b["merchant_id"].(string), "--data-dir", dir)
	cliJSON(t, "client", "revoke", "--client-id", second["client_id"].(string), "--data-dir", dir)
	p := cliJSON(t, "partner", "create", "--name", "Books Co", "--image-url", "https://books.example/logo.png",
		"--callback-uri", "https://books.example/cb", "--callback-uri", "https://books.example/cb2", "--data-dir", dir)
	secrets := []string{a["client_secret"].(string), b["client_secret"].(string), second["client_secret"].(string), p["client_secret"].(string)}
	printed := ""
	run := func(args ...string) map[string]any {
		t.Helper()
		stdout, stderr, code := cli(t, append(args, "--data-dir", dir)...)
		if code != 0 {
			t.Fatalf("kassa %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		printed += stdout
		return decodeOne(t, stdout)
	}

	list := run("merchant", "list")["merchants"].([]any)
	if len(list) != 2 {
		t.Fatalf("merchant list: %v", list)
	}
	first := list[0].(map[string]any)
	if first["merchant_id"] != a["merchant_id"] || first["account_id"] != a["account_id"] || first["name"] != "Alder" ||
		first["email"] != "alder@example.com" || first["default_currency"] != "CAD" || first["created_at"] == "" ||
		list[1].(map[string]any)["default_currency"] != "USD" {
		t.Fatalf("merchant list, oldest first: %v", list)
	}

	show := run("merchant", "show", "--merchant-id", b["merchant_id"].(string))
	if show["merchant_id"] != b["merchant_id"] || show["name"] != "Birch" || show["account_id"] != b["account_id"] ||
		show["default_currency"] != "USD" || show["max_amount"] != "999999.99" || fmt.Sprint(show["processor"]) != "map[name:simulator settings:map[] test:true]" {
		t.Fatalf("merchant show: %v", show)
	}
	if _, stderr, code := cli(t, "merchant", "show", "--merchant-id", "0000000000", "--data-dir", dir); code != 1 || !strings.Contains(stderr, "no merchant") {
		t.Fatalf("merchant show of an unknown merchant: exit %d, %s", code, stderr)
	}

	clients := run("client", "list", "--merchant-id", b["merchant_id"].(string))
	cl := clients["clients"].([]any)
	if clients["merchant_id"] != b["merchant_id"] || len(cl) != 2 {
		t.Fatalf("client list: %v", clients)
	}
	for _, c := range cl {
		c := c.(map[string]any)
		revoked := c["client_id"] == second["client_id"]
		if c["active"] == revoked || (c["revoked_at"] != nil) != revoked || c["last_used_at"] != nil || c["token_validity_seconds"] == nil {
			t.Errorf("client %v (revoked %v)", c, revoked)
		}
	}
	if _, stderr, code := cli(t, "client", "list", "--merchant-id", "0000000000", "--data-dir", dir); code != 1 || !strings.Contains(stderr, "no merchant") {
		t.Fatalf("client list of an unknown merchant: exit %d, %s", code, stderr)
	}

	partners := run("partner", "list")["partners"].([]any)
	if len(partners) != 1 {
		t.Fatalf("partner list: %v", partners)
	}
	if pp := partners[0].(map[string]any); pp["partner_id"] != p["partner_id"] || pp["account_id"] != p["account_id"] || pp["name"] != "Books Co" ||
		fmt.Sprint(pp["callback_uris"]) != "[https://books.example/cb https://books.example/cb2]" {
		t.Fatalf("partner list: %v", pp)
	}
	for _, s := range secrets {
		if strings.Contains(printed, s) {
			t.Fatal("a list printed a client secret")
		}
	}
	if strings.Contains(printed, "secret") {
		t.Fatalf("a list printed a field named like a secret:\n%s", printed)
	}
}

// Run from a directory without ./kassa-data, a command other than serve refuses to create an empty
// database and says where it looked (--init creates one on purpose).
func TestRefusesToCreateADatabase(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return cliIn(t, wd, []string{"KASSA_DATA_DIR=", "KASSA_DATABASE_URL="}, args...)
	}
	for _, args := range [][]string{{"merchant", "list"}, {"merchant", "create", "--name", "A", "--email", "a@example.com"}, {"migrate"}} {
		stdout, stderr, code := run(args...)
		want := filepath.Join(wd, "kassa-data", "kassa.db")
		if code != 1 || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--init") {
			t.Errorf("kassa %s without a database: exit %d, %q %q; want 1, naming %s and --init", strings.Join(args, " "), code, stdout, stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "kassa-data")); !os.IsNotExist(err) {
		t.Fatalf("a refused command left a data directory behind (%v)", err)
	}
	if _, stderr, code := run("merchant", "create", "--init", "--name", "A", "--email", "a@example.com"); code != 0 {
		t.Fatalf("merchant create --init: exit %d, %s", code, stderr)
	}
	if stdout, stderr, code := run("merchant", "list"); code != 0 || !strings.Contains(stdout, "a@example.com") {
		t.Fatalf("merchant list once the database exists: exit %d, %s %s", code, stdout, stderr)
	}
}

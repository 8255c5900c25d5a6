package main_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// What make run prints is what the README shows: the line that says it builds and make's commands,
// as make -n lists them (it prints the build's $(info) line too), then everything the command the run
// target ends with prints on stdout and stderr, run as it is in a directory without a database. The blocks that go on with the values it printed work with those
// of that start: getting started's, which keeps them in variables and the token in $TOKEN, and the
// README's first sale, which approves.
func TestREADMEMakeRun(t *testing.T) {
	t.Parallel()
	needTools(t, "make", "curl", "jq", "sh")
	commands := makeDryRun(t, "run")
	lines := strings.Split(strings.TrimSpace(commands), "\n")
	if !strings.HasPrefix(lines[0], "building bin/kassa ") {
		t.Fatalf("make run does not say that it builds before it does: %q", commands)
	}
	args, ok := strings.CutPrefix(lines[len(lines)-1], "exec bin/kassa ")
	if !ok {
		t.Fatalf("make run does not end by running bin/kassa: %q", commands)
	}

	out := &cardtest.Buffer{}
	cmd := exec.Command(kassaBin, strings.Fields(args)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(environWithout("KASSA_"), "KASSA_ADDR=127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = out, out // one pipe: the lines in the order they were written, as in a terminal
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("kassa serve did not stop within 30 s of SIGTERM")
		}
		cardtest.Check(t, "the output of make run", out.String())
	})
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "password?token=") || !strings.HasSuffix(out.String(), "\n\n") {
		if time.Now().After(deadline) {
			t.Fatalf("the demo's banner never printed:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	printed := out.String()
	addr := regexp.MustCompile(`Kassa is listening on http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(printed)
	if addr == nil {
		t.Fatalf("no address in:\n%s", printed)
	}
	terminal := commands + strings.ReplaceAll(printed, addr[1], "127.0.0.1:8080")
	values, err := readmetest.Match(readmetest.Block(t, "<!-- make-run:", ""), terminal)
	if err != nil {
		t.Fatalf("make run prints what the README does not show: %v\nmake run printed:\n%s", err, terminal)
	}

	// withValues is a documented block with the values of this start in place of its samples: its runs
	// of hex with a letter in them (a run of decimal digits is a card number or an amount).
	withValues := func(marker string) string {
		script := readmetest.Block(t, marker, "sh")
		for _, v := range regexp.MustCompile(`\b[0-9a-f]{8,}\b`).FindAllString(script, -1) {
			if !strings.ContainsAny(v, "abcdef") {
				continue
			}
			if values[v] == "" {
				t.Fatalf("the %s block uses %s, which the output of make run does not show", marker, v)
			}
			script = strings.ReplaceAll(script, v, values[v])
		}
		return strings.ReplaceAll(script, "127.0.0.1:8080", addr[1])
	}
	script := withValues("<!-- quickstart-token:") +
		`curl -sf -H "Authorization: Bearer $TOKEN" http://` + addr[1] + `/transaction-service/transaction > /dev/null` + "\n" +
		`printf '%s' "$TOKEN"`
	token, err := exec.Command("sh", "-e", "-c", script).Output()
	if err != nil || !strings.HasPrefix(string(token), "kat_") {
		t.Fatalf("the token block: %v, $TOKEN is %q\n%s", err, token, script)
	}
	sale, err := exec.Command("sh", "-e", "-c", withValues("<!-- first-sale:")).Output()
	if err != nil || !strings.Contains(string(sale), `"transaction_result":"APPROVED"`) || !strings.Contains(string(sale), `"test_mode":true`) {
		t.Fatalf("the README's first sale: %v, it printed %s", err, sale)
	}
}

// makeDryRun is what make -n prints for the target and command-line variables ("VAR=value") given, in
// the repository, as a newcomer's make would run it: no variables of a calling make or of the
// environment override the Makefile's.
func makeDryRun(t *testing.T, args ...string) string {
	t.Helper()
	mk := exec.Command("make", append([]string{"-n", "--no-print-directory"}, args...)...)
	mk.Dir = "../.."
	mk.Env = environWithout("GO", "BUILD_FLAGS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// make run ARGS="…" passes its flags to kassa serve, after --demo; without ARGS the command ends at
// --demo, with no trailing space for the README's block to show.
func TestMakeRunArgs(t *testing.T) {
	t.Parallel()
	needTools(t, "make")
	for args, want := range map[string]string{
		"":                                    "exec bin/kassa serve --demo",
		"--addr 127.0.0.1:9090":               "exec bin/kassa serve --demo --addr 127.0.0.1:9090",
		"--addr 127.0.0.1:9090 --data-dir /x": "exec bin/kassa serve --demo --addr 127.0.0.1:9090 --data-dir /x",
	} {
		lines := strings.Split(strings.TrimRight(makeDryRun(t, "run", "ARGS="+args), "\n"), "\n")
		if last := lines[len(lines)-1]; last != want {
			t.Errorf("make run ARGS=%q runs %q, want %q", args, last, want)
		}
	}
}

// environWithout is the test's environment without the variables named, or starting with a name
// that ends in "_".
func environWithout(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n || (strings.HasSuffix(n, "_") && strings.HasPrefix(name, n))
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// The README's walk-through of the gateway API — its Transactions, Customers and Plans blocks, one
// after the other in one shell as a reader pastes them — works as it stands against kassa serve, with
// $TOKEN as the quickstart sets it, and each variable a block sets from an answer's field names what
// the next block needs, so that the README says which response field fills each $VAR.
func TestREADMEGatewayAPI(t *testing.T) {
	t.Parallel()
	needTools(t, "curl", "jq", "sh")
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Readme Shop", "--email", "readme@example.com", "--data-dir", dir)
	srv := startServer(t, nil, "--data-dir", dir)
	script := readmetest.Block(t, "<!-- gateway-api-transactions:", "sh") + readmetest.Block(t, "<!-- gateway-api-customers:", "sh") +
		readmetest.Block(t, "<!-- gateway-api-plans:", "sh") + `printf '\nvariables %s %s %s %s\n' "$CUSTOMER" "$CARD" "$PLAN" "$SUBSCRIPTION"`
	text := runREADME(t, srv, script, "TOKEN="+token(t, srv.url, m))
	for _, want := range []string{`"transaction_type":"SALE"`, `"transaction_type":"REFUND"`, `"amount":12.50`, `"status":"CANCELED"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("the README's blocks printed no %s:\n%s", want, text)
		}
	}
	if !regexp.MustCompile(`(?m)^variables( [A-Z0-9]{10}){4}$`).MatchString(text) {
		t.Fatalf("the README's blocks left a variable without a lookup id:\n%s", text)
	}
}

// The README's invoice walk-through works as it stands against kassa serve with the quickstart's
// token: it creates the invoice with the totals the README explains, sends it, downloads its PDF,
// reads, lists and cancels it, with curl.
func TestREADMEInvoices(t *testing.T) {
	t.Parallel()
	needTools(t, "curl", "jq", "sh")
	dir := t.TempDir()
	m := cliJSON(t, "merchant", "create", "--init", "--name", "Readme Shop", "--email", "readme@example.com", "--data-dir", dir)
	srv := startServer(t, nil, "--data-dir", dir)
	// The block saves the invoice's PDF in the directory it runs in: its first bytes say it is one.
	script := readmetest.Block(t, "<!-- gateway-api-invoices:", "sh") + "head -c 5 invoice-2026-001.pdf; echo\n"
	text := runREADME(t, srv, script, "TOKEN="+token(t, srv.url, m))
	want := regexp.MustCompile(`^\{"status":"SENT","total_amount":176\.98,"payment_url":"http://127\.0\.0\.1:\d+/invoice/([A-Z2-7]{26})/pay","pdf_url":"http://127\.0\.0\.1:\d+/invoice/([A-Z2-7]{26})/pdf"\}
\{"subtotal_amount":149\.98,"tax_amount":19\.5,"total_amount":176\.98\}
2026-001
CANCELLED
\{"status":"PAID","payment_info":\{"method":"card","amount":250,"card_last4":"4242"\}\}
%PDF-
$`)
	if keys := want.FindStringSubmatch(text); keys == nil || keys[1] != keys[2] {
		t.Fatalf("the README's invoice block printed (pdf_url's secret is payment_url's):\n%s", text)
	}
}

// needTools skips t (or fails it, with KASSA_REQUIRE_ALL=1) when a command it runs is not installed.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			storetest.Unavailable(t, "the README's example needs %s", tool)
		}
	}
}

// runREADME runs a README shell script against srv (for the README's http://127.0.0.1:8080) with the
// variables env ("NAME=value") set, and returns what it printed; it fails t when the script fails or
// an answer is an error.
func runREADME(t *testing.T, srv *server, script string, env ...string) string {
	t.Helper()
	run := strings.ReplaceAll(script, "http://127.0.0.1:8080", srv.url)
	if run == script {
		t.Fatal("the README's script names no http://127.0.0.1:8080 address")
	}
	cmd := exec.Command("sh", "-e", "-c", run)
	cmd.Dir = t.TempDir() // where a block that saves a file (the invoice's PDF) saves it
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's script failed: %v\n%s", err, out)
	}
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("the README's script met an error:\n%s", out)
	}
	return string(out)
}

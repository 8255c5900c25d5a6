package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card/cardtest"
)

// The end-to-end tests of the ISO 8583 connector run "kassa serve" with merchants
// on the iso8583 processor against a real kassa-acquirer process, and look at what reached the host
// through the host's own HTTP interface: its journal, its settlement report, its controls.

// acquirerHost is a kassa-acquirer process run by a test.
type acquirerHost struct {
	dir    string // its data directory, where the journal is
	addr   string // the ISO 8583 address
	base   string // the HTTP base URL
	cmd    *exec.Cmd
	stderr *cardtest.Buffer
	done   chan error
	ended  bool
}

// startAcquirer runs "kassa-acquirer --addr 127.0.0.1:0 --http 127.0.0.1:0 --data-dir DIR" on a new
// data directory and waits until it listens.
func startAcquirer(t *testing.T) *acquirerHost {
	t.Helper()
	return runAcquirer(t, t.TempDir(), "127.0.0.1:0", "127.0.0.1:0")
}

// restart runs the host again on the same data directory and the same addresses, once a has ended.
func (a *acquirerHost) restart(t *testing.T) *acquirerHost {
	t.Helper()
	return runAcquirer(t, a.dir, a.addr, strings.TrimPrefix(a.base, "http://"))
}

func runAcquirer(t *testing.T, dir, addr, httpAddr string) *acquirerHost {
	t.Helper()
	a := &acquirerHost{dir: dir, stderr: &cardtest.Buffer{}, done: make(chan error, 1)}
	a.cmd = exec.Command(acquirerBin, "--addr", addr, "--http", httpAddr, "--data-dir", dir)
	a.cmd.Stderr = a.stderr
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// "kassa-acquirer is listening on ADDR (ISO 8583), journal in DIR", then "HTTP on http://ADDR: …".
	listening := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var l [2]string
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "kassa-acquirer is listening on "); ok {
				l[0] = strings.Fields(rest)[0]
			}
			if rest, ok := strings.CutPrefix(sc.Text(), "HTTP on "); ok {
				l[1] = strings.TrimSuffix(strings.Fields(rest)[0], ":")
				listening <- l
			}
		}
		close(listening)
		io.Copy(io.Discard, out)
		a.done <- a.cmd.Wait()
	}()
	t.Cleanup(func() {
		a.stop(t)
		cardtest.Check(t, "the acquirer's log", a.stderr.String())
	})
	select {
	case l, ok := <-listening:
		if !ok {
			t.Fatalf("kassa-acquirer exited before listening:\n%s", a.stderr)
		}
		a.addr, a.base = l[0], l[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("kassa-acquirer did not listen within 30 s:\n%s", a.stderr)
	}
	return a
}

// stop ends the host with SIGTERM, which lets the requests being answered finish.
func (a *acquirerHost) stop(t *testing.T) {
	t.Helper()
	if a.ended {
		return
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		a.ended = true
		if err != nil {
			t.Errorf("kassa-acquirer exited with %v after SIGTERM:\n%s", err, a.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("kassa-acquirer did not stop within 30 s of SIGTERM")
		a.kill(t)
	}
}

// kill ends the host with SIGKILL: whatever it was doing is cut off.
func (a *acquirerHost) kill(t *testing.T) {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	a.ended = true
}

// get fetches a path of the host's HTTP interface, which must answer 200.
func (a *acquirerHost) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(a.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, body, err)
	}
	return body
}

// journal is what the host received with field 62 ref (Kassa's transaction_id) and how it answered,
// in order: "GET /journal?reference=R".
func (a *acquirerHost) journal(t *testing.T, ref string) []acquirer.Entry {
	t.Helper()
	var out []acquirer.Entry
	if err := json.Unmarshal(a.get(t, "/journal?reference="+ref), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// control sets the host's controls: "POST /control" with {"drop_next":N,"latency":"50ms","drop_rate":0.1}.
func (a *acquirerHost) control(t *testing.T, body string) {
	t.Helper()
	resp, err := http.Post(a.base+"/control", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /control %s: %s", body, resp.Status)
	}
}

// report saves the host's settlement report of today (UTC), "GET /settlement/YYYY-MM-DD.csv", in a
// file, and returns the day and the file's name.
func (a *acquirerHost) report(t *testing.T) (day, file string) {
	t.Helper()
	day = time.Now().UTC().Format(time.DateOnly)
	file = filepath.Join(t.TempDir(), day+".csv")
	if err := os.WriteFile(file, a.get(t, "/settlement/"+day+".csv"), 0o600); err != nil {
		t.Fatal(err)
	}
	return day, file
}

// reconcile runs "kassa reconcile --merchant-id M --date YYYY-MM-DD --report FILE" with the host's
// report of today: the report and the ledger must agree (exit 0, every list empty), and matched must
// count every operation. It returns what the command printed.
func (a *acquirerHost) reconcile(t *testing.T, dbFlags []string, m map[string]any, matched int) map[string]any {
	t.Helper()
	day, file := a.report(t)
	stdout, stderr, code := cli(t, append([]string{"reconcile", "--merchant-id", m["merchant_id"].(string), "--date", day, "--report", file}, dbFlags...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("kassa reconcile: exit %d, %s\n%s", code, stderr, stdout)
	}
	out := decodeOne(t, stdout)
	if out["matched"] != float64(matched) {
		t.Fatalf("kassa reconcile matched %v operations, want %d: %s", out["matched"], matched, stdout)
	}
	return out
}

// isoMerchant creates a merchant and connects it to the host as its terminal tid (8 characters), as an
// operator does: "kassa merchant create", then "kassa merchant update --merchant-id M --processor
// iso8583 --processor-config FILE" with a live account (test false) whose calls wait timeout for an
// answer. It returns what "kassa merchant create" printed.
func isoMerchant(t *testing.T, dbFlags []string, host *acquirerHost, tid, timeout string) map[string]any {
	t.Helper()
	m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Shop " + tid, "--email", strings.ToLower(tid) + "@shop.example"}, dbFlags...)...)
	config := filepath.Join(t.TempDir(), "iso8583.json")
	if err := os.WriteFile(config, fmt.Appendf(nil, `{"address":%q,"merchant_id":%q,"terminal_id":%q,"acquirer_id":"1234567","timeout":%q,"test":false}`,
		host.addr, "SHOP000"+tid, tid, timeout), 0o600); err != nil {
		t.Fatal(err)
	}
	out := cliJSON(t, append([]string{"merchant", "update", "--merchant-id", m["merchant_id"].(string), "--processor", "iso8583",
		"--processor-config", config}, dbFlags...)...)
	if p, _ := out["processor"].(map[string]any); p["name"] != "iso8583" || p["test"] != false {
		t.Fatalf("merchant update --processor iso8583 printed %v", out)
	}
	return m
}

// sent is the one entry of the host's journal for the transaction tx: the host received it once, and
// answered (not a retransmission, a refusal or a withheld answer).
func (a *acquirerHost) sent(t *testing.T, tx map[string]any) acquirer.Entry {
	t.Helper()
	j := a.journal(t, tx["transaction_id"].(string))
	if len(j) != 1 || j[0].Status != acquirer.StatusProcessed || j[0].Dropped {
		t.Fatalf("the journal of %s %s: %+v, want one entry processed and answered", tx["transaction_type"], tx["transaction_id"], j)
	}
	return j[0]
}

// names is the start of field 90 that names e: its MTI, STAN and field 7.
func names(e acquirer.Entry) string { return e.MTI + e.STAN + e.Transmission }

// eventually waits until done is true, for at most within.
func eventually(t *testing.T, what string, within time.Duration, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keyedCard is the card fields of a gateway API payment of amount CAD keyed with a CVV2.
func keyedCard(number, amount string) string {
	return `{"amount":"` + amount + `","currency":"CAD","card_number":"` + number + `","card_expiry_month":12,"card_expiry_year":2030,"cvv2":"123"}`
}

// isoShop is a merchant on the iso8583 processor, the kassa-acquirer host it is connected to, and the
// "kassa serve" it pays through, with a token of its client.
type isoShop struct {
	host    *acquirerHost
	dbFlags []string
	m       map[string]any // what "kassa merchant create" printed
	srv     *server
	tok     string
}

// newISOShop starts a host, creates a merchant connected to it as the terminal tid whose account
// waits timeout for an answer (isoMerchant), in a new database of backend, and serves it with the
// flags serve.
func newISOShop(t *testing.T, backend, tid, timeout string, serve ...string) *isoShop {
	t.Helper()
	s := &isoShop{host: startAcquirer(t), dbFlags: dbArgs(t, backend)}
	s.m = isoMerchant(t, s.dbFlags, s.host, tid, timeout)
	s.serve(t, serve...)
	return s
}

// serve starts "kassa serve" on the shop's database with flags, and gets a token.
func (s *isoShop) serve(t *testing.T, flags ...string) {
	t.Helper()
	s.srv = startServer(t, nil, append(append([]string{}, flags...), s.dbFlags...)...)
	s.tok = token(t, s.srv.url, s.m)
}

// pay posts body to a path of the gateway API, which must answer 200.
func (s *isoShop) pay(t *testing.T, path, body string) map[string]any {
	t.Helper()
	return callJSON(t, "POST", s.srv.url+path, s.tok, body)
}

// get reads a path of the gateway API, which must answer 200.
func (s *isoShop) get(t *testing.T, path string) map[string]any {
	t.Helper()
	return callJSON(t, "GET", s.srv.url+path, s.tok, "")
}

// customer creates a customer with the card number stored, and returns the lookup_id of both.
func (s *isoShop) customer(t *testing.T, number string) (c, card string) {
	t.Helper()
	c = s.pay(t, "/customer-service/customer", `{"email":"ada@example.com"}`)["lookup_id"].(string)
	cards := s.pay(t, "/customer-service/customer/"+c+"/card", `{"card_number":"`+number+`","card_expiry_month":12,"card_expiry_year":2030}`)["cards"].([]any)
	return c, cards[0].(map[string]any)["lookup_id"].(string)
}

// subscribe subscribes the customer c (on its default card) to a new daily plan of 5.00 CAD; the
// billing engine charges its first cycle at once. It returns the subscription's lookup_id.
func (s *isoShop) subscribe(t *testing.T, c string) string {
	t.Helper()
	plan := s.pay(t, "/plan-service/plan", `{"name":"Daily box","amount":"5.00","currency":"CAD","frequency":"DAILY"}`)["lookup_id"].(string)
	subs := s.pay(t, "/customer-service/customer/"+c+"/subscription", `{"plan_lookup_id":"`+plan+`"}`)["subscriptions"].([]any)
	return subs[0].(map[string]any)["lookup_id"].(string)
}

// charges are the subscriptions' charges the ledger lists (those settled), oldest first.
func (s *isoShop) charges(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, tx := range s.get(t, "/transaction-service/transaction?limit=100")["entities"].([]any) {
		if tx := tx.(map[string]any); tx["transaction_source"] == "RECURRING" {
			out = append([]map[string]any{tx}, out...) // the list is newest first
		}
	}
	return out
}

// reconcile is the host's reconcile of the shop's merchant.
func (s *isoShop) reconcile(t *testing.T, matched int) map[string]any {
	t.Helper()
	return s.host.reconcile(t, s.dbFlags, s.m, matched)
}

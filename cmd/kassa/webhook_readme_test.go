package main_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store"
)

// The webhooks guide's Go receiver works as written: built against the library version Kassa's
// tests verify with (from the module cache, no network) and run with the endpoint's secret and a
// port, it is sent an event by kassa serve --webhooks-allow-private over plain HTTP on 127.0.0.1,
// verifies it, logs its id and type and answers 204, which the delivery log records; a request whose
// signature does not verify is answered 400.
func TestWebhooksGuideGoReceiver(t *testing.T) {
	t.Parallel()
	needTools(t, "go")
	ctx := context.Background()
	src := readmetest.Block(t, "And in Go with the specification's library", "go")
	build := t.TempDir()
	sum, err := os.ReadFile(filepath.Join("..", "..", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(sum), "\n") {
		if strings.HasPrefix(l, "github.com/standard-webhooks/") {
			lines = append(lines, l)
		}
	}
	for name, body := range map[string]string{
		"main.go": src,
		"go.mod":  "module example\n\ngo 1.22\n\nrequire github.com/standard-webhooks/standard-webhooks/libraries v0.0.1\n",
		"go.sum":  strings.Join(lines, "\n") + "\n",
	} {
		if err := os.WriteFile(filepath.Join(build, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"vet", "."}, {"build", "-o", "receiver", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = build
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the guide's receiver: %v\n%s", args[0], err, out)
		}
	}

	dir := t.TempDir()
	mid := cliJSON(t, "merchant", "create", "--init", "--name", "Local Shop", "--email", "local@example.com", "--data-dir", dir)["merchant_id"].(string)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // the receiver listens there
	target := "http://127.0.0.1:" + port + "/kassa/webhooks"
	ep := cliJSON(t, "webhook", "create", "--merchant-id", mid, "--url", target, "--webhooks-allow-private", "--data-dir", dir)

	logged := &cardtest.Buffer{}
	rc := exec.Command(filepath.Join(build, "receiver"))
	rc.Env = append(os.Environ(), "KASSA_WEBHOOK_SECRET="+ep["secret"].(string), "PORT="+port)
	rc.Stdout, rc.Stderr = logged, logged
	if err := rc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Process.Kill(); rc.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receiver does not listen on %s: %s", port, logged)
		}
	}
	forged, err := http.NewRequest("POST", target, strings.NewReader(`{"type":"customer.created","data":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	forged.Header.Set("webhook-id", "evt_forged")
	forged.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	forged.Header.Set("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged request was answered %d, want 400", resp.StatusCode)
	}

	startServer(t, nil, "--webhooks-allow-private", "--data-dir", dir)
	db, err := store.Open(ctx, store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := event.New(mid, event.CustomerCreated, map[string]string{"id": "cus_local"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *store.Tx) error { return e.Write(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var status int
		err := db.Reader().QueryRowContext(ctx, `SELECT a.status_code FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
			JOIN events ev ON ev.id = d.event_id WHERE ev.event_id = $1 ORDER BY a.id DESC LIMIT 1`, e.ID).Scan(&status)
		if err == nil {
			if status != http.StatusNoContent {
				t.Fatalf("the receiver answered the delivery %d, want 204; it logged:\n%s", status, logged)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt of the delivery in 20 s; the receiver logged:\n%s", logged)
		}
	}
	if !strings.Contains(logged.String(), " "+e.ID+" customer.created\n") {
		t.Fatalf("the receiver logged %q, not the event's id and type", logged)
	}
}

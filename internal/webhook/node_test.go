package webhook

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// StandardWebhooksVersion is the npm standardwebhooks release the Node test verifies with;
// scripts/test-deps.sh installs the same version.
const StandardWebhooksVersion = "1.1.1"

// standardWebhooksPath is where the test finds the npm package standardwebhooks: $KASSA_STANDARDWEBHOOKS
// when set, else where scripts/test-deps.sh installs it, under the user's cache directory
// (${XDG_CACHE_HOME:-~/.cache}/kassa/standardwebhooks-VERSION/node_modules/standardwebhooks).
func standardWebhooksPath() string {
	if p := os.Getenv("KASSA_STANDARDWEBHOOKS"); p != "" {
		return p
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kassa", "standardwebhooks-"+StandardWebhooksVersion, "node_modules", "standardwebhooks")
}

// nodeVerify checks each delivery with the npm library, under the secret, under another secret, and
// with a byte of its body changed; it prints one line per delivery: the three outcomes.
const nodeVerify = `
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const { Webhook } = require(input.lib);
const check = (secret, body, headers) => {
  try { new Webhook(secret).verify(body, headers); return 'ok'; } catch (e) { return 'refused'; }
};
for (const d of input.deliveries) {
  const headers = {};
  for (const [k, v] of Object.entries(d.header)) headers[k.toLowerCase()] = v[0];
  const changed = d.body.replace('Zo', 'Zp');
  console.log([check(input.secret, d.body, headers), check(input.other, d.body, headers), check(input.secret, changed, headers)].join(' '));
}
`

// The deliveries that the Go library verifies verify with the npm library too; another secret, or a
// body changed by one byte, do not.
func TestDeliveriesVerifyWithTheNodeLibrary(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "Node.js is not installed")
	}
	lib := standardWebhooksPath()
	if _, err := os.Stat(filepath.Join(lib, "package.json")); err != nil {
		storetest.Unavailable(t, "standardwebhooks %s is not installed (%v): run scripts/test-deps.sh, or npm install --prefix DIR standardwebhooks@%s "+
			"and set KASSA_STANDARDWEBHOOKS=DIR/node_modules/standardwebhooks", StandardWebhooksVersion, err, StandardWebhooksVersion)
	}
	rc := newReceiver(t, nil)
	f := newFixture(t, storetest.SQLite(t), Config{AllowPrivate: true, RootCAs: roots(rc)})
	m := f.merchant(t, "node@example.com")
	_, secret := f.endpoint(t, m, rc.srv.URL)
	f.record(t, m, 3)
	f.drive(t)
	in, _ := json.Marshal(map[string]any{"lib": lib, "secret": secret, "other": NewSecret(), "deliveries": rc.requests()})
	cmd := exec.Command(node, "-e", nodeVerify)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("node printed %q, want a line for each of 3 deliveries", out)
	}
	for i, l := range lines {
		if l != "ok refused refused" {
			t.Errorf("delivery %d: %s, want it verified under its secret only, and not with its body changed", i, l)
		}
	}
}

// The README's Node example verifies real deliveries, and refuses one whose body was changed.
func TestReadmeNodeExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "Node.js is not installed")
	}
	lib := standardWebhooksPath()
	if _, err := os.Stat(filepath.Join(lib, "package.json")); err != nil {
		storetest.Unavailable(t, "standardwebhooks %s is not installed: run scripts/test-deps.sh", StandardWebhooksVersion)
	}
	rc := newReceiver(t, nil)
	f := newFixture(t, storetest.SQLite(t), Config{AllowPrivate: true, RootCAs: roots(rc)})
	m := f.merchant(t, "readme@example.com")
	_, secret := f.endpoint(t, m, rc.srv.URL)
	f.record(t, m, 1)
	f.drive(t)
	r := rc.requests()[0]
	in, _ := json.Marshal(map[string]any{"secret": secret, "body": r.Body, "headers": map[string]string{
		"webhook-id": r.Header.Get("webhook-id"), "webhook-timestamp": r.Header.Get("webhook-timestamp"),
		"webhook-signature": r.Header.Get("webhook-signature")}})
	script := readmetest.Block(t, "Verifying a delivery in Node", "js") + `
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
console.log(verifyKassa(input.secret, input.body, input.headers).type);
try { verifyKassa(input.secret, input.body.replace('Zo', 'Zp'), input.headers); console.log('changed body verified'); } catch (e) { console.log('refused'); }
`
	cmd := exec.Command(node, "-e", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Dir(lib))
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "customer.created\nrefused\n" {
		t.Fatalf("the README's example printed %q (%v), want the event's type, then refused", out, err)
	}
}

// The version the tests pin is the one scripts/test-deps.sh installs.
func TestStandardWebhooksVersionInstalled(t *testing.T) {
	b, err := os.ReadFile("../../scripts/test-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nstandardwebhooks_version="+StandardWebhooksVersion+"\n") {
		t.Fatalf("scripts/test-deps.sh does not install standardwebhooks %s", StandardWebhooksVersion)
	}
}

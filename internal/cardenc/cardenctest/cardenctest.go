// Package cardenctest runs the CardEncryption script (web/card-encryption.js) under Node for Go tests,
// so that they can check what the browser side makes against the server side.
package cardenctest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// harness runs web/card-encryption.js under Node: it encrypts each card with key and prints the
// tokens (or the errors thrown) as JSON. With a seed and a time, randomness and the clock are fixed,
// so that the result can be compared bit for bit with another implementation.
const harness = `
const fs = require('fs');
const input = JSON.parse(fs.readFileSync(0, 'utf8'));
if (input.seed) {
  const seed = Buffer.from(input.seed, 'hex');
  Object.defineProperty(globalThis, 'crypto', { configurable: true,
    value: { getRandomValues: (a) => { a.set(seed.subarray(0, a.length)); return a; } } });
}
if (input.now) Date.now = () => input.now;
require(input.script);
const out = input.cards.map((c) => {
  try { return globalThis.CardEncryption(input.key, ...c); } catch (e) { return 'ERR ' + e.name + ': ' + e.message; }
});
process.stdout.write(JSON.stringify(out));
`

// Input is what the script is asked to encrypt: Key is a merchant's public encryption key, Cards are
// (number, month, year, cvv2). With Seed (hex) and Now (epoch ms), randomness and clock are fixed.
type Input struct {
	Script string      `json:"script"`
	Key    string      `json:"key"`
	Cards  [][4]string `json:"cards"`
	Seed   string      `json:"seed,omitempty"`
	Now    int64       `json:"now,omitempty"`
}

// Encrypt encrypts cards with the script under Node and returns the tokens, or "ERR <name>: <message>"
// for a card the script refused. It skips t when Node is missing (fails it under KASSA_REQUIRE_ALL=1).
func Encrypt(t testing.TB, in Input) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		storetest.Unavailable(t, "Node.js is not installed")
	}
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "..", "web", "card-encryption.js")
	in.Script = script
	b, _ := json.Marshal(in)
	cmd := exec.Command(node, "-e", harness)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var tokens []string
	if err := json.Unmarshal(out, &tokens); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	return tokens
}

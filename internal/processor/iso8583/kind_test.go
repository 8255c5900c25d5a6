package iso8583_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/readmetest"
	"github.com/kassapay/kassa/internal/tlscert/tlscerttest"
)

// tlsFiles writes a self-signed certificate and its key to PEM files, and a file that is not PEM. The
// certificate is its own CA and serves 127.0.0.1 as a server and as a client.
func tlsFiles(t *testing.T) (cert, key, notPEM string) {
	t.Helper()
	p := tlscerttest.New(t, "kassa")
	notPEM = filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p.CertFile, p.KeyFile, notPEM
}

func TestParse(t *testing.T) {
	t.Parallel()
	k := iso8583.NewKind(iso8583.KindConfig{})
	if k.Name() != "iso8583" {
		t.Errorf("Name() = %q", k.Name())
	}
	cert, key, notPEM := tlsFiles(t)
	q := func(s string) string { return `"` + s + `"` }
	valid := map[string]string{"address": q("acquirer.example:9583"), "merchant_id": q("KASSA0000000001"), "terminal_id": q("TERM0001"),
		"acquirer_id": q("12345"), "timeout": q("10s"), "test": "false",
		"tls": `{"ca_file":` + q(cert) + `,"cert_file":` + q(cert) + `,"key_file":` + q(key) + `}`}
	// build is the valid configuration with change applied: a member set to a JSON value, or removed
	// when the value is "".
	build := func(change map[string]string) []byte {
		m := maps.Clone(valid)
		for name, v := range change {
			if v == "" {
				delete(m, name)
			} else {
				m[name] = v
			}
		}
		var parts []string
		for name, v := range m {
			parts = append(parts, q(name)+":"+v)
		}
		return []byte("{" + strings.Join(parts, ",") + "}")
	}

	s, err := k.Parse(build(nil))
	if err != nil {
		t.Fatalf("Parse(valid) = %v", err)
	}
	want := map[string]string{"address": "acquirer.example:9583", "merchant_id": "KASSA0000000001", "terminal_id": "TERM0001",
		"acquirer_id": "12345", "timeout": "10s", "tls.ca_file": cert, "tls.cert_file": cert, "tls.key_file": key}
	if s.Test || !maps.Equal(s.Fields, want) {
		t.Errorf("Parse(valid) = %+v, want fields %v and test false", s, want)
	}
	if s, err := k.Parse(build(map[string]string{"test": "true", "tls": ""})); err != nil || !s.Test || len(s.Fields) != 5 {
		t.Errorf("Parse(test account without TLS) = %+v, %v", s, err)
	}
	if _, err := k.Parse(build(map[string]string{"tls": "{}"})); err != nil {
		t.Errorf("Parse(TLS with the system's roots, no client certificate) = %v", err)
	}
	if _, err := k.Open(build(nil)); err == nil {
		t.Error("Open on a kind without a database succeeded")
	}

	for _, tc := range []struct {
		name   string
		config []byte
		field  string // the field the error names; "" for the whole configuration
	}{
		{"bad JSON", []byte(`{"address":`), ""},
		{"not an object", []byte(`["address"]`), ""},
		{"null", []byte(`null`), ""},
		{"two values", append(build(nil), build(nil)...), ""},
		{"unknown field", build(map[string]string{"secret_key": q("x")}), "secret_key"},
		{"unknown TLS field", build(map[string]string{"tls": `{"ca_file":` + q(cert) + `,"password":"x"}`}), "tls.password"},
		{"missing address", build(map[string]string{"address": ""}), "address"},
		{"address without port", build(map[string]string{"address": q("acquirer.example")}), "address"},
		{"address without host", build(map[string]string{"address": q(":9583")}), "address"},
		{"address with port 0", build(map[string]string{"address": q("acquirer.example:0")}), "address"},
		{"address with a port too large", build(map[string]string{"address": q("acquirer.example:65536")}), "address"},
		{"address not a string", build(map[string]string{"address": "9583"}), "address"},
		{"missing merchant_id", build(map[string]string{"merchant_id": ""}), "merchant_id"},
		{"merchant_id of 14", build(map[string]string{"merchant_id": q("KASSA000000001")}), "merchant_id"},
		{"merchant_id of 16", build(map[string]string{"merchant_id": q("KASSA00000000001")}), "merchant_id"},
		{"missing terminal_id", build(map[string]string{"terminal_id": ""}), "terminal_id"},
		{"terminal_id of 9", build(map[string]string{"terminal_id": q("TERM00001")}), "terminal_id"},
		{"terminal_id not ASCII", build(map[string]string{"terminal_id": q("TERMé001")}), "terminal_id"},
		{"empty terminal_id", build(map[string]string{"terminal_id": q("")}), "terminal_id"},
		{"missing acquirer_id", build(map[string]string{"acquirer_id": ""}), "acquirer_id"},
		{"acquirer_id not digits", build(map[string]string{"acquirer_id": q("12a45")}), "acquirer_id"},
		{"acquirer_id of 12 digits", build(map[string]string{"acquirer_id": q("123456789012")}), "acquirer_id"},
		{"acquirer_id a number", build(map[string]string{"acquirer_id": "12345"}), "acquirer_id"},
		{"missing timeout", build(map[string]string{"timeout": ""}), "timeout"},
		{"timeout without unit", build(map[string]string{"timeout": q("10")}), "timeout"},
		{"timeout zero", build(map[string]string{"timeout": q("0s")}), "timeout"},
		{"timeout negative", build(map[string]string{"timeout": q("-1s")}), "timeout"},
		{"timeout too long", build(map[string]string{"timeout": q("3m")}), "timeout"},
		{"missing test", build(map[string]string{"test": ""}), "test"},
		{"test a string", build(map[string]string{"test": q("true")}), "test"},
		{"tls not an object", build(map[string]string{"tls": q(cert)}), "tls"},
		{"tls.ca_file not a string", build(map[string]string{"tls": `{"ca_file":1}`}), "tls.ca_file"},
		{"tls.ca_file missing", build(map[string]string{"tls": `{"ca_file":` + q(cert+".missing") + `}`}), "tls.ca_file"},
		{"tls.ca_file not PEM", build(map[string]string{"tls": `{"ca_file":` + q(notPEM) + `}`}), "tls.ca_file"},
		{"tls.cert_file without key", build(map[string]string{"tls": `{"cert_file":` + q(cert) + `}`}), "tls.key_file"},
		{"tls.key_file without cert", build(map[string]string{"tls": `{"key_file":` + q(key) + `}`}), "tls.cert_file"},
		{"tls key not the certificate's", build(map[string]string{"tls": `{"cert_file":` + q(cert) + `,"key_file":` + q(notPEM) + `}`}), "tls.cert_file"},
	} {
		_, err := k.Parse(tc.config)
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Field != tc.field || (tc.field != "" && !strings.Contains(fe.Message, tc.field)) {
			t.Errorf("%s: Parse = %v, want an error naming %q", tc.name, err, tc.field)
		}
		if _, err := k.Open(tc.config); err == nil {
			t.Errorf("%s: Open accepted the configuration", tc.name)
		}
	}
}

// The configuration that the acquirer guide (docs/guides/acquirers.md) writes to acquirer.json is one
// that Parse takes, for a test account at the address its kassa-acquirer listens on.
func TestREADMEConfiguration(t *testing.T) {
	t.Parallel()
	block := readmetest.Block(t, "<!-- acquirer-config:", "sh")
	_, rest, ok := strings.Cut(block, "<<'JSON'\n")
	config, _, closed := strings.Cut(rest, "\nJSON\n")
	if !ok || !closed {
		t.Fatalf("the README's walk-through writes no acquirer.json: %s", block)
	}
	s, err := iso8583.NewKind(iso8583.KindConfig{}).Parse([]byte(config))
	if err != nil || !s.Test || s.Fields["address"] != "127.0.0.1:9583" || !strings.Contains(block, "--addr 127.0.0.1:9583") {
		t.Fatalf("Parse(README) = %+v, %v", s, err)
	}
}

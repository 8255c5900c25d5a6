package iso8583

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
)

// KindConfig configures the "iso8583" kind of processor.
type KindConfig struct {
	DB     *store.DB // where STANs and RRNs are reserved (iso8583_series)
	Logger *slog.Logger
	Now    func() time.Time // fields 7, 12 and 13; default time.Now
	// EchoInterval is how long a connection stays idle before an echo test (default 30 s: "echo after
	// 30 s idle", the profile).
	EchoInterval time.Duration
	// NetworkTimeout bounds a sign-on, echo test or sign-off, and the TCP and TLS handshake (default
	// 10 s).
	NetworkTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the wait before reconnecting to a host: ReconnectMin after a
	// drop, doubling after each failed attempt up to ReconnectMax, each wait drawn between its half and
	// its whole (defaults 250 ms and 30 s).
	ReconnectMin, ReconnectMax time.Duration
	// Block is how many STANs or RRNs one database write reserves (default 1000).
	Block int
}

// Kind is the "iso8583" kind of processor: accounts at acquirer hosts that speak Kassa's ISO 8583
// profile. It owns one connection per host (address and TLS settings), shared by every account on
// that host, and the numbering of their messages.
type Kind struct {
	cfg KindConfig
	log *slog.Logger

	mu     sync.Mutex
	hosts  map[string]*host   // by hostKey
	series map[string]*series // by series name
	closed bool
}

var _ processor.Kind = (*Kind)(nil)

// NewKind returns the kind; it connects to nothing until an account is opened.
func NewKind(cfg KindConfig) *Kind {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.EchoInterval <= 0 {
		cfg.EchoInterval = 30 * time.Second
	}
	if cfg.NetworkTimeout <= 0 {
		cfg.NetworkTimeout = 10 * time.Second
	}
	if cfg.ReconnectMin <= 0 {
		cfg.ReconnectMin = 250 * time.Millisecond
	}
	if cfg.ReconnectMax < cfg.ReconnectMin {
		cfg.ReconnectMax = max(30*time.Second, cfg.ReconnectMin)
	}
	if cfg.Block <= 0 {
		cfg.Block = 1000
	}
	return &Kind{cfg: cfg, log: cfg.Logger, hosts: map[string]*host{}, series: map[string]*series{}}
}

// Name is "iso8583".
func (k *Kind) Name() string { return "iso8583" }

// Parse validates an account's configuration and returns what of it may be shown: every field, the
// TLS file names included (paths, not key material).
func (k *Kind) Parse(config []byte) (processor.Settings, error) {
	a, err := parseAccount(config)
	if err != nil {
		return processor.Settings{}, err
	}
	fields := map[string]string{"address": a.address, "merchant_id": a.merchantID, "terminal_id": a.terminalID,
		"acquirer_id": a.acquirerID, "timeout": a.timeout.String()}
	if a.tls != nil {
		for name, v := range map[string]string{"tls.ca_file": a.tls.CAFile, "tls.cert_file": a.tls.CertFile, "tls.key_file": a.tls.KeyFile} {
			if v != "" {
				fields[name] = v
			}
		}
	}
	return processor.Settings{Test: a.test, Fields: fields}, nil
}

// Open returns the processor of an account. Accounts on one host share its connection, which the
// kind opens with the first of them and keeps until Close.
func (k *Kind) Open(config []byte) (processor.Processor, error) {
	a, err := parseAccount(config)
	if err != nil {
		return nil, err
	}
	if k.cfg.DB == nil {
		return nil, errors.New("iso8583: the kind has no database to number messages from")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errors.New("iso8583: the kind is closed")
	}
	key := a.hostKey()
	h, ok := k.hosts[key]
	if !ok {
		h = newHost(k, a.address, a.tlsConfig)
		k.hosts[key] = h
	}
	return &Processor{host: h, account: a, now: k.cfg.Now,
		stans: k.seriesLocked("stan "+a.acquirerID+" "+a.terminalID, stanSkip),
		rrns:  k.seriesLocked("rrn "+a.acquirerID, rrnSkip)}, nil
}

// seriesLocked returns the series of that name, shared by every account that numbers from it, which
// moves on by skip after a promotion of the database.
func (k *Kind) seriesLocked(name string, skip int64) *series {
	s, ok := k.series[name]
	if !ok {
		s = &series{name: name, db: k.cfg.DB, size: int64(k.cfg.Block), skip: skip}
		k.series[name] = s
	}
	return s
}

// Close signs off from every host and closes the connections, waiting for the requests in flight.
func (k *Kind) Close() error {
	k.mu.Lock()
	k.closed = true
	hosts := k.hosts
	k.hosts = map[string]*host{}
	k.mu.Unlock()
	for _, h := range hosts {
		h.close()
	}
	return nil
}

// account is an account's configuration, as Parse accepted it.
type account struct {
	address    string
	merchantID string // field 42
	terminalID string // field 41
	acquirerID string // in field 90
	timeout    time.Duration
	test       bool
	tls        *tlsFiles   // nil: plain TCP
	tlsConfig  *tls.Config // built from tls
}

// tlsFiles are the files of an account's TLS settings.
type tlsFiles struct {
	CAFile   string `json:"ca_file"`   // the host's CA (PEM); default the system's roots
	CertFile string `json:"cert_file"` // Kassa's client certificate (PEM), with KeyFile
	KeyFile  string `json:"key_file"`
}

// hostKey names the host an account connects to: accounts with the same address and TLS settings
// share one connection.
func (a account) hostKey() string {
	if a.tls == nil {
		return a.address
	}
	return a.address + " tls " + strconv.Quote(a.tls.CAFile) + " " + strconv.Quote(a.tls.CertFile) + " " + strconv.Quote(a.tls.KeyFile)
}

// maxTimeout bounds an account's timeout: a host that has not answered in two minutes is not going to,
// and the payment's HTTP client has long gone.
const maxTimeout = 2 * time.Minute

// parseAccount reads an account's configuration: {"address", "merchant_id", "terminal_id",
// "acquirer_id", "timeout", "tls" (optional), "test"}. An error is a *fault.Error naming the field.
func parseAccount(config []byte) (account, error) {
	obj, err := object(config, "")
	if err != nil {
		return account{}, err
	}
	if err := known(obj, "", "address", "merchant_id", "terminal_id", "acquirer_id", "timeout", "tls", "test"); err != nil {
		return account{}, err
	}
	var a account
	if a.address, err = str(obj, "address"); err != nil {
		return account{}, err
	}
	if host, port, err := net.SplitHostPort(a.address); err != nil || host == "" || !validPort(port) {
		return account{}, fault.Invalid("address", "address must be host:port, such as acquirer.example:9583")
	}
	// Fields 42 and 41 are fixed-length (15 and 8 characters) in the profile: an id of another length
	// would be padded by guesswork, so it is refused.
	if a.merchantID, err = fixed(obj, "merchant_id", 15); err != nil {
		return account{}, err
	}
	if a.terminalID, err = fixed(obj, "terminal_id", 8); err != nil {
		return account{}, err
	}
	if a.acquirerID, err = str(obj, "acquirer_id"); err != nil {
		return account{}, err
	}
	if len(a.acquirerID) > 11 || !digits(a.acquirerID, len(a.acquirerID)) {
		return account{}, fault.Invalid("acquirer_id", "acquirer_id must be 1 to 11 digits (field 90 carries it zero-padded to 11)")
	}
	t, err := str(obj, "timeout")
	if err != nil {
		return account{}, err
	}
	if a.timeout, err = time.ParseDuration(t); err != nil || a.timeout <= 0 || a.timeout > maxTimeout {
		return account{}, fault.Invalid("timeout", "timeout must be a duration such as 10s, at most %s", maxTimeout)
	}
	raw, ok := obj["test"]
	if !ok {
		return account{}, fault.Invalid("test", "test is required: true for a test account, false for a live one")
	}
	if err := json.Unmarshal(raw, &a.test); err != nil {
		return account{}, fault.Invalid("test", "test must be true or false")
	}
	if raw, ok := obj["tls"]; ok {
		if a.tls, a.tlsConfig, err = parseTLS(raw); err != nil {
			return account{}, err
		}
	}
	return a, nil
}

// parseTLS reads the "tls" object and loads its files, so that a bad path or file is refused when the
// account is configured rather than when the connection is made.
func parseTLS(raw json.RawMessage) (*tlsFiles, *tls.Config, error) {
	obj, err := object(raw, "tls")
	if err != nil {
		return nil, nil, err
	}
	if err := known(obj, "tls.", "ca_file", "cert_file", "key_file"); err != nil {
		return nil, nil, err
	}
	var f tlsFiles
	for _, m := range []struct {
		name string
		dst  *string
	}{{"ca_file", &f.CAFile}, {"cert_file", &f.CertFile}, {"key_file", &f.KeyFile}} {
		if _, ok := obj[m.name]; !ok {
			continue
		}
		if *m.dst, err = str(obj, m.name); err != nil {
			return nil, nil, fault.Invalid("tls."+m.name, "tls.%s must be a file name", m.name)
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, nil, fault.Invalid("tls.ca_file", "tls.ca_file cannot be read: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, nil, fault.Invalid("tls.ca_file", "tls.ca_file holds no PEM certificate")
		}
	}
	switch {
	case f.CertFile == "" && f.KeyFile != "":
		return nil, nil, fault.Invalid("tls.cert_file", "tls.cert_file is required with tls.key_file")
	case f.CertFile != "" && f.KeyFile == "":
		return nil, nil, fault.Invalid("tls.key_file", "tls.key_file is required with tls.cert_file")
	case f.CertFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, nil, fault.Invalid("tls.cert_file", "tls.cert_file and tls.key_file are not a certificate and its key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &f, cfg, nil
}

// object decodes a JSON object into its members; where names it for errors ("" for the whole
// configuration).
func object(data []byte, where string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		if where == "" {
			return nil, fault.BadRequest("invalid_request", "The configuration must be one JSON object: %v", errOr(err, "not an object"))
		}
		return nil, fault.Invalid(where, "%s must be a JSON object", where)
	}
	return obj, nil
}

func errOr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// known refuses a member of obj that is not one of names; prefix qualifies the member's name.
func known(obj map[string]json.RawMessage, prefix string, names ...string) error {
	var unknown []string
	for name := range obj {
		if !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fault.Invalid(prefix+unknown[0], "%s%s is not a field of an iso8583 configuration", prefix, unknown[0])
}

// str reads the non-empty string member name.
func str(obj map[string]json.RawMessage, name string) (string, error) {
	raw, ok := obj[name]
	if !ok {
		return "", fault.Invalid(name, "%s is required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fault.Invalid(name, "%s must be a non-empty string", name)
	}
	return s, nil
}

// fixed reads the string member name, which must be n printable ASCII characters.
func fixed(obj map[string]json.RawMessage, name string, n int) (string, error) {
	s, err := str(obj, name)
	if err != nil {
		return "", err
	}
	if len(s) != n || !printable(s) {
		return "", fault.Invalid(name, "%s must be exactly %d printable ASCII characters, as the acquirer assigned it", name, n)
	}
	return s, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535 && fmt.Sprint(n) == p
}

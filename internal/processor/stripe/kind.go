// Package stripe connects Kassa to Stripe: a merchant whose processor is "stripe" has its card
// payments carried out as Stripe PaymentIntents on the merchant's own Stripe account, with the card
// data Kassa holds (Stripe's raw card data APIs), so that the vault, billing and hosted page stay in
// Kassa and the money moves through Stripe.
//
// Every call carries Kassa's reference as its Idempotency-Key, so a retry of a call is the same call
// to Stripe; Lookup finds an operation whose answer was lost by that reference (see Lookup). Stripe's
// declines are mapped to Kassa's decline codes; a call that got no answer, a 5xx or a 429 is an
// error (an unknown outcome), never a decline.
package stripe

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v86"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor"
)

// Name is the kind's name, as `kassa merchant update --processor` takes it.
const Name = "stripe"

// DefaultSettle is KindConfig.Settle's default.
const DefaultSettle = 5 * time.Minute

// KindConfig configures the kind "stripe", shared by every Stripe account.
type KindConfig struct {
	// HTTPClient carries every account's requests (default stripe-go's client, 80 s timeout). The
	// payments core bounds each call with its processor timeout through the context.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// NetworkRetries is how many times stripe-go sends a call again, under the same Idempotency-Key,
	// after it got no answer (a connection refused, reset or closed) or a 429 lock_timeout (default
	// 2; negative for none). stripe-go v86 never sends a call again after a 5xx or any other 429.
	NetworkRetries int
	// Settle is how long after an operation was prepared (its trace) a request for it may still reach
	// Stripe, clocks' skew included: Lookup answers that Stripe never received an operation only once
	// this long has passed (default DefaultSettle; see Lookup).
	Settle time.Duration
}

// Kind is the processor.Kind "stripe".
type Kind struct {
	http    *http.Client
	log     *slog.Logger
	now     func() time.Time
	retries int64
	settle  time.Duration
}

var _ processor.Kind = (*Kind)(nil)

// NewKind returns the kind "stripe".
func NewKind(cfg KindConfig) *Kind {
	k := &Kind{http: cfg.HTTPClient, log: cfg.Logger, now: cfg.Now, retries: int64(cfg.NetworkRetries), settle: cfg.Settle}
	if k.log == nil {
		k.log = slog.Default()
	}
	if k.now == nil {
		k.now = time.Now
	}
	switch {
	case cfg.NetworkRetries == 0:
		k.retries = stripego.DefaultMaxNetworkRetries
	case cfg.NetworkRetries < 0:
		k.retries = 0
	}
	if k.settle <= 0 {
		k.settle = DefaultSettle
	}
	return k
}

// Name returns "stripe".
func (k *Kind) Name() string { return Name }

// config is an account's configuration: {"secret_key":"sk_…","api_base":"https://…"}.
type config struct {
	SecretKey string
	APIBase   string // "" for Stripe's own
	Test      bool
}

// keyPrefixes are the kinds of Stripe API key an account may be configured with, and whether each is
// a test key. Restricted keys (rk_) are accepted: the least privilege Stripe offers, they need write
// access to PaymentMethods, PaymentIntents, SetupIntents and Refunds and read access to Events.
// Publishable keys (pk_) cannot create payments, and anything else is not a Stripe key.
var keyPrefixes = []struct {
	prefix string
	test   bool
}{{"sk_test_", true}, {"sk_live_", false}, {"rk_test_", true}, {"rk_live_", false}}

// Parse validates an account's configuration. It shows whether the key is a test key, and the key
// masked as Stripe's dashboard shows it (its kind and, for a full-length key, its last four
// characters), never the key.
func (k *Kind) Parse(raw []byte) (processor.Settings, error) {
	c, err := parseConfig(raw)
	if err != nil {
		return processor.Settings{}, err
	}
	fields := map[string]string{"secret_key": masked(c.SecretKey)}
	if c.APIBase != "" {
		fields["api_base"] = c.APIBase
	}
	return processor.Settings{Test: c.Test, Fields: fields}, nil
}

func parseConfig(raw []byte) (config, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil || fields == nil || dec.More() {
		// The decoder's message may quote what it read, and that may be the key: say nothing of it.
		return config{}, fault.Invalid("", "the stripe configuration must be one JSON object")
	}
	var c config
	for name, value := range fields {
		var s string
		switch name {
		case "secret_key", "api_base":
			if json.Unmarshal(value, &s) != nil {
				return config{}, fault.Invalid(name, "%s must be a string", name)
			}
		default:
			return config{}, fault.Invalid(name, "unknown field %q (a stripe configuration has secret_key and api_base)", name)
		}
		if name == "secret_key" {
			c.SecretKey = s
		} else {
			c.APIBase = s
		}
	}
	if c.SecretKey == "" {
		return config{}, fault.Invalid("secret_key", "secret_key is required")
	}
	known := false
	for _, p := range keyPrefixes {
		if body, ok := strings.CutPrefix(c.SecretKey, p.prefix); ok && alphanumeric(body) {
			known, c.Test = true, p.test
		}
	}
	if !known {
		return config{}, fault.Invalid("secret_key", "secret_key must be a Stripe secret key (sk_test_…, sk_live_…) or restricted key (rk_test_…, rk_live_…)")
	}
	if c.APIBase != "" {
		if err := checkAPIBase(c.APIBase); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func alphanumeric(s string) bool {
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// checkAPIBase accepts an absolute https URL, or http to a loopback address (stripe-mock, a local
// fake): the key travels in every request's Authorization header and must not cross a network in clear.
func checkAPIBase(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fault.Invalid("api_base", "api_base must be an absolute URL such as https://api.stripe.com")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fault.Invalid("api_base", "api_base must be an https:// URL (http:// only to a loopback address)")
}

// masked is a key as Stripe's dashboard shows it: sk_live_…abcd. The last four characters are shown
// only of a key long enough that they give nothing away (Stripe's keys have 24 characters or more
// after the prefix).
func masked(key string) string {
	i := strings.LastIndexByte(key, '_') + 1
	if len(key)-i < 24 {
		return key[:i] + "…"
	}
	return key[:i] + "…" + key[len(key)-4:]
}

// Open returns the processor of an account: a Stripe client of its own, with the account's key and,
// when the configuration names one, its API base.
func (k *Kind) Open(raw []byte) (processor.Processor, error) {
	c, err := parseConfig(raw)
	if err != nil {
		return nil, err
	}
	backend := &stripego.BackendConfig{
		HTTPClient: k.http,
		// stripe-go logs whole responses and errors; the connector logs what it needs itself.
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
		MaxNetworkRetries: stripego.Int64(k.retries),
	}
	if c.APIBase != "" {
		backend.URL = stripego.String(c.APIBase)
	}
	api := stripego.NewClient(c.SecretKey, stripego.WithBackends(stripego.NewBackendsWithConfig(backend)))
	return &Processor{api: api, log: k.log, now: k.now, settle: k.settle}, nil
}

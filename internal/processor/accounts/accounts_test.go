package accounts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/accounts"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fakeKind is a connector whose configuration has a secret: {"endpoint", "secret", "test"}.
type fakeKind struct{ opens *atomic.Int64 }

type fakeConfig struct {
	Endpoint string `json:"endpoint"`
	Secret   string `json:"secret"`
	Test     bool   `json:"test"`
}

func (fakeKind) Name() string { return "fake" }

func (fakeKind) Parse(config []byte) (processor.Settings, error) {
	var c fakeConfig
	if err := json.Unmarshal(config, &c); err != nil {
		return processor.Settings{}, errors.New("it must be a JSON object")
	}
	switch {
	case c.Endpoint == "":
		return processor.Settings{}, errors.New("endpoint is required")
	case c.Secret == "":
		return processor.Settings{}, errors.New("secret is required")
	}
	return processor.Settings{Test: c.Test, Fields: map[string]string{"endpoint": c.Endpoint}}, nil
}

func (k fakeKind) Open(config []byte) (processor.Processor, error) {
	k.opens.Add(1)
	var c fakeConfig
	err := json.Unmarshal(config, &c)
	return &fakeProcessor{Processor: simulator.New(simulator.Config{}), config: c}, err
}

// fakeProcessor is the simulator, with the configuration it was opened with.
type fakeProcessor struct {
	processor.Processor
	config fakeConfig
}

// env is a Service over one database, with a clock and a count of the accounts it opened.
type env struct {
	*accounts.Service
	db    *store.DB
	kek   *envelope.KEK
	clk   *clock.Manual
	sim   *simulator.Simulator
	opens *atomic.Int64
}

func newEnv(t testing.TB, db *store.DB, kek *envelope.KEK, interval time.Duration) *env {
	t.Helper()
	e := &env{db: db, kek: kek, clk: clock.NewManual(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)), sim: simulator.New(simulator.Config{}),
		opens: new(atomic.Int64)}
	e.Service = accounts.New(accounts.Config{DB: db, Keyring: ring(t, db, kek), Kinds: []processor.Kind{fakeKind{e.opens}}, Simulator: e.sim,
		Now: func() time.Time { return e.clk.Now() }, Logger: slog.New(slog.DiscardHandler), RefreshInterval: interval})
	return e
}

func newMerchant(t testing.TB, db *store.DB, name string) string {
	t.Helper()
	var id string
	err := db.Write(context.Background(), func(tx *store.Tx) error {
		m, err := merchant.Create(context.Background(), tx, merchant.New{Name: name, Email: strings.ToLower(name) + "@example.com"}, time.Now())
		id = m.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) set(t testing.TB, merchantID, kind, config string) (accounts.Summary, error) {
	t.Helper()
	var out accounts.Summary
	err := e.db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		out, err = e.Set(context.Background(), tx, merchantID, kind, []byte(config))
		return err
	})
	return out, err
}

func (e *env) mustSet(t testing.TB, merchantID, kind, config string) accounts.Summary {
	t.Helper()
	out, err := e.set(t, merchantID, kind, config)
	if err != nil {
		t.Fatalf("Set(%s): %v", kind, err)
	}
	return out
}

func (e *env) refresh(t testing.TB) {
	t.Helper()
	if err := e.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) forMerchant(t testing.TB, merchantID string) processor.Account {
	t.Helper()
	a, err := e.ForMerchant(context.Background(), merchantID)
	if err != nil {
		t.Fatalf("ForMerchant: %v", err)
	}
	return a
}

// configOf is the configuration the account's processor was opened with.
func configOf(t testing.TB, a processor.Account) fakeConfig {
	t.Helper()
	p, ok := a.Processor.(*fakeProcessor)
	if !ok {
		t.Fatalf("account %q of kind %s has processor %T, not the fake kind's", a.ID, a.Kind, a.Processor)
	}
	return p.config
}

const (
	liveConfig = `{"endpoint":"acquirer.example:9583","secret":"sk_live_51HushHushHush","test":false}`
	testConfig = `{"endpoint":"sandbox.example:9583","secret":"sk_test_51WhisperWhisper","test":true}`
)

// A merchant is on the simulator until set to a connector; it is then on its account, with the
// configuration it was given, and back on the simulator when set to it. Set answers what may be shown.
func TestSetAndForMerchant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m, other := newMerchant(t, db, "Shop"), newMerchant(t, db, "Other")
		if _, err := e.ForMerchant(context.Background(), m); !errors.Is(err, accounts.ErrNotLoaded) {
			t.Fatalf("ForMerchant before the first refresh: %v, want ErrNotLoaded", err)
		}
		e.refresh(t)
		sim := processor.Account{ID: "", Kind: "simulator", Test: true, Processor: e.sim}
		if a := e.forMerchant(t, m); a != sim {
			t.Fatalf("a new merchant is on %+v, want the simulator", a)
		}

		s := e.mustSet(t, m, "fake", liveConfig)
		if s.Name != "fake" || s.Test || fmt.Sprint(s.Settings) != "map[endpoint:acquirer.example:9583]" || !strings.HasPrefix(s.Account, "pa_") {
			t.Fatalf("Set answered %+v", s)
		}
		if d := describe(t, db, m); fmt.Sprint(d) != fmt.Sprint(s) {
			t.Fatalf("Describe = %+v, want what Set answered, %+v", d, s)
		}
		e.refresh(t)
		a := e.forMerchant(t, m)
		if a.ID != s.Account || a.Kind != "fake" || a.Test || configOf(t, a) != (fakeConfig{"acquirer.example:9583", "sk_live_51HushHushHush", false}) {
			t.Fatalf("after Set the merchant is on %+v", a)
		}
		if a := e.forMerchant(t, other); a != sim {
			t.Fatalf("another merchant moved too: %+v", a)
		}

		s = e.mustSet(t, m, "simulator", "")
		if s.Name != "simulator" || !s.Test || s.Account != "" || len(s.Settings) != 0 {
			t.Fatalf("Set(simulator) answered %+v", s)
		}
		if d := describe(t, db, m); fmt.Sprint(d) != fmt.Sprint(s) {
			t.Fatalf("Describe = %+v, want %+v", d, s)
		}
		e.refresh(t)
		if a := e.forMerchant(t, m); a != sim {
			t.Fatalf("set back to the simulator, the merchant is on %+v", a)
		}
		var pointer *string
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT processor_account FROM merchants WHERE id = $1`, m).Scan(&pointer); err != nil || pointer != nil {
			t.Fatalf("the merchant's processor_account is %v (%v), want NULL", pointer, err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM processor_accounts`); n != 1 {
			t.Fatalf("%d account rows; the simulator has none, so want the one of the fake kind", n)
		}
	})
}

func describe(t *testing.T, db *store.DB, merchantID string) accounts.Summary {
	t.Helper()
	d, err := accounts.Describe(context.Background(), db.Reader(), merchantID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func count(t *testing.T, db *store.DB, query string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// What Set refuses, it refuses naming what is wrong, without quoting the configuration, and stores
// nothing.
func TestSetValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m := newMerchant(t, db, "Shop")
		for _, tc := range []struct {
			name, merchant, kind, config string
			field, msg                   string
		}{
			{"unknown kind", m, "paypal", liveConfig, "processor", `processor must be one of fake, simulator, not "paypal"`},
			{"bad JSON", m, "fake", `{"endpoint":"a","secret":"sk_live_51Hush`, "processor_config", "the fake configuration is not valid JSON (at byte 40)"},
			{"trailing garbage", m, "fake", liveConfig + "}", "processor_config", "the fake configuration is not valid JSON (at byte 84)"},
			{"missing field", m, "fake", `{"endpoint":"a"}`, "processor_config", "the fake configuration: secret is required"},
			{"no configuration", m, "fake", "", "processor_config", "the fake configuration: endpoint is required"},
			{"not an object", m, "fake", `["sk_live_51Hush"]`, "processor_config", "the fake configuration: it must be a JSON object"},
			{"simulator with a field", m, "simulator", `{"latency":"5s"}`, "processor_config", "the simulator configuration: the simulator takes no configuration; unknown field latency"},
			{"simulator not an object", m, "simulator", `null`, "processor_config", "the simulator configuration: it must be a JSON object"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.set(t, tc.merchant, tc.kind, tc.config)
				var f *fault.Error
				if !errors.As(err, &f) || f.Field != tc.field || f.Message != tc.msg {
					t.Fatalf("Set = %v; want a fault on %s saying %q", err, tc.field, tc.msg)
				}
				if strings.Contains(f.Message, "Hush") {
					t.Fatalf("the message quotes the configuration: %q", f.Message)
				}
			})
		}
		for _, kind := range []string{"fake", "simulator"} {
			config := map[string]string{"fake": liveConfig, "simulator": "{}"}[kind]
			if _, err := e.set(t, "0000000000", kind, config); !errors.Is(err, merchant.ErrNotFound) {
				t.Fatalf("Set(%s) of an unknown merchant = %v, want merchant.ErrNotFound", kind, err)
			}
		}
		if n := count(t, db, `SELECT COUNT(*) FROM processor_accounts`); n != 0 {
			t.Fatalf("refused configurations left %d account rows", n)
		}
	})
}

// The configuration is stored sealed: no byte of the database, free pages and write-ahead log
// included, holds the secret in any common encoding, and a sealed configuration moved onto another
// account does not open.
func TestConfigurationIsSealed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m := newMerchant(t, db, "Shop")
		live := e.mustSet(t, m, "fake", liveConfig)
		e.mustSet(t, m, "fake", testConfig)
		storetest.NotStored(t, storetest.RawData(t, db), map[string]string{
			"the live account's secret": "sk_live_51HushHushHush", "the test account's secret": "sk_test_51WhisperWhisper",
			"a part of a secret": "HushHush"})
		var settings string
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT settings FROM processor_accounts WHERE id = $1`, live.Account).Scan(&settings); err != nil {
			t.Fatal(err)
		}
		if settings != `{"endpoint":"acquirer.example:9583"}` {
			t.Fatalf("shown settings stored as %s", settings)
		}

		// Swap the sealed configurations of the two accounts: neither opens.
		mustExec(t, db, `UPDATE processor_accounts SET config = (SELECT config FROM processor_accounts WHERE id <> $1) WHERE id = $1`, live.Account)
		if _, err := e.Account(context.Background(), live.Account); !errors.Is(err, envelope.ErrOpen) {
			t.Fatalf("an account with another account's sealed configuration opened: %v", err)
		}
	})
}

func mustExec(t *testing.T, db *store.DB, query string, args ...any) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), query, args...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// An account is never updated: a second Set makes a new one, the first keeps its row byte for byte,
// and Account of the first still opens its own configuration, for the transactions it took.
func TestAccountsAreNeverUpdated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		kek := servertest.NewKEK(t)
		e := newEnv(t, db, kek, 0)
		m := newMerchant(t, db, "Shop")
		first := e.mustSet(t, m, "fake", liveConfig)
		row := func(id string) string {
			var merchantID, kind, settings string
			var config []byte
			var test bool
			var created int64
			if err := db.Reader().QueryRowContext(context.Background(), `SELECT merchant_id, kind, config, settings, test, created_at
				FROM processor_accounts WHERE id = $1`, id).Scan(&merchantID, &kind, &config, &settings, &test, &created); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%s %s %x %s %v %d", merchantID, kind, config, settings, test, created)
		}
		before := row(first.Account)
		e.clk.Advance(time.Hour)
		second := e.mustSet(t, m, "fake", testConfig)
		if second.Account == first.Account || !second.Test {
			t.Fatalf("the second Set answered %+v after %+v", second, first)
		}
		if after := row(first.Account); after != before {
			t.Fatalf("the first account's row changed:\n%s\n%s", before, after)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM processor_accounts`); n != 2 {
			t.Fatalf("%d account rows, want 2", n)
		}

		// Another node (a fresh Service) opens each account with its own configuration.
		node := newEnv(t, db, kek, 0)
		node.refresh(t)
		if a := node.forMerchant(t, m); a.ID != second.Account || !a.Test || configOf(t, a).Secret != "sk_test_51WhisperWhisper" {
			t.Fatalf("the merchant's new payments go to %+v", a)
		}
		old, err := node.Account(context.Background(), first.Account)
		if err != nil || old.ID != first.Account || old.Kind != "fake" || old.Test || configOf(t, old).Secret != "sk_live_51HushHushHush" {
			t.Fatalf("Account(first) = %+v, %v", old, err)
		}
	})
}

// Account opens an account once and keeps it: the merchant's payments and every follow-up share one
// processor. "" is the simulator.
func TestAccountIsOpenedOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m := newMerchant(t, db, "Shop")
		s := e.mustSet(t, m, "fake", liveConfig)
		e.refresh(t)
		a := e.forMerchant(t, m)
		for range 3 {
			b, err := e.Account(context.Background(), s.Account)
			if err != nil || b.Processor != a.Processor {
				t.Fatalf("Account = %+v, %v; want the processor ForMerchant answered", b, err)
			}
		}
		e.refresh(t)
		if n := e.opens.Load(); n != 1 {
			t.Fatalf("the account was opened %d times", n)
		}
		if sim, err := e.Account(context.Background(), ""); err != nil || sim.Processor != e.sim || sim.Kind != "simulator" || !sim.Test {
			t.Fatalf(`Account("") = %+v, %v`, sim, err)
		}
		if _, err := e.Account(context.Background(), "pa_missing"); err == nil {
			t.Fatal("Account of an unknown id answered")
		}
	})
}

// An account this node cannot open is an error for the merchant's payments, never the simulator,
// and a later refresh retries it.
func TestAnAccountThatDoesNotOpenIsNotTheSimulator(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m := newMerchant(t, db, "Shop")
		s := e.mustSet(t, m, "fake", liveConfig)
		// As on a node of a build without the fake kind:
		mustExec(t, db, `UPDATE processor_accounts SET kind = 'gone' WHERE id = $1`, s.Account)
		fresh := newEnv(t, db, e.kek, 0)
		fresh.refresh(t)
		if a, err := fresh.ForMerchant(context.Background(), m); err == nil || !strings.Contains(err.Error(), `kind "gone"`) {
			t.Fatalf("ForMerchant of an account of an unknown kind = %+v, %v", a, err)
		}
		mustExec(t, db, `UPDATE processor_accounts SET kind = 'fake' WHERE id = $1`, s.Account)
		fresh.refresh(t)
		if a := fresh.forMerchant(t, m); a.ID != s.Account {
			t.Fatalf("after the retry the merchant is on %+v", a)
		}
	})
}

// Two nodes on one PostgreSQL database: a processor set through one is taken by the other's
// ForMerchant within a few of its refresh intervals, and so is the way back to the simulator.
func TestAChangeReachesTheOtherNode(t *testing.T) {
	url := storetest.PostgresURL(t)
	const interval = 100 * time.Millisecond
	kek := servertest.NewKEK(t)
	one, two := newEnv(t, openURL(t, url), kek, interval), newEnv(t, openURL(t, url), kek, interval)
	m := newMerchant(t, one.db, "Shop")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, e := range []*env{one, two} {
		e.refresh(t)
		go e.Run(ctx)
	}
	// seen waits until the second node's ForMerchant answers the account id, and says how long it took.
	seen := func(id string) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if a := two.forMerchant(t, m); a.ID == id {
				return time.Since(start)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("the second node did not take account %q within 5 s", id)
		return 0
	}
	// Within a few refreshes: a loaded machine delays a refresh by tens of milliseconds, and a node
	// that did not refresh would keep the old account for good.
	const within = 10 * interval
	s := one.mustSet(t, m, "fake", liveConfig)
	if d := seen(s.Account); d > within {
		t.Errorf("the second node took the new account after %v; its refresh interval is %v", d, interval)
	}
	if a := two.forMerchant(t, m); configOf(t, a).Secret != "sk_live_51HushHushHush" {
		t.Fatalf("the second node opened %+v", a)
	}
	one.mustSet(t, m, "simulator", "{}")
	if d := seen(""); d > within {
		t.Errorf("the second node went back to the simulator after %v; its refresh interval is %v", d, interval)
	}
}

func openURL(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A refresh reads only the merchants whose processor changed since the last one (and those of the
// minute before, for changes that committed late): a pointer changed without its stamp goes unseen.
func TestRefreshReadsOnlyWhatChanged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, servertest.NewKEK(t), 0)
		m, other := newMerchant(t, db, "Shop"), newMerchant(t, db, "Other")
		s := e.mustSet(t, m, "fake", liveConfig)
		e.refresh(t)
		e.clk.Advance(2 * time.Minute)
		e.mustSet(t, other, "fake", testConfig)
		e.refresh(t)
		mustExec(t, db, `UPDATE merchants SET processor_account = NULL WHERE id = $1`, m)
		e.refresh(t)
		if a := e.forMerchant(t, m); a.ID != s.Account {
			t.Fatalf("a refresh read a merchant that did not change since the last one: %+v", a)
		}
		e.mustSet(t, m, "simulator", "")
		e.refresh(t)
		if a := e.forMerchant(t, m); a.ID != "" {
			t.Fatalf("a change was not read: %+v", a)
		}
	})
}

// A change made by a writer whose clock is behind (the CLI on another host) is stamped after the
// newest change all the same, so that nodes that read past its time still read it.
func TestAChangeFromASlowClockIsRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		kek := servertest.NewKEK(t)
		node, slow := newEnv(t, db, kek, 0), newEnv(t, db, kek, 0)
		slow.clk = clock.NewManual(node.clk.Now().Add(-time.Hour))
		m, other := newMerchant(t, db, "Shop"), newMerchant(t, db, "Other")
		node.mustSet(t, other, "fake", liveConfig)
		node.refresh(t)
		s := slow.mustSet(t, m, "fake", testConfig)
		node.refresh(t)
		if a := node.forMerchant(t, m); a.ID != s.Account {
			t.Fatalf("a change stamped by a clock an hour behind was not read: the merchant is on %+v", a)
		}
	})
}

func ring(t testing.TB, db *store.DB, kek *envelope.KEK) *envelope.Keyring {
	t.Helper()
	r, err := envelope.NewKeyring(context.Background(), db, kek, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ForMerchant answers from memory: with the database closed, every merchant is still answered.
func TestForMerchantReadsNoDatabase(t *testing.T) {
	e, ms, closeDB := loaded(t, 20)
	closeDB()
	for i, m := range ms {
		a, err := e.ForMerchant(context.Background(), m)
		if err != nil || (i%2 == 0) != (a.Kind == "fake") {
			t.Fatalf("merchant %d with the database closed: %+v, %v", i, a, err)
		}
	}
}

// loaded is a Service over a SQLite database of its own with n merchants, every other one on an
// account of the fake kind, refreshed; closeDB closes the database.
func loaded(t testing.TB, n int) (e *env, merchants []string, closeDB func()) {
	t.Helper()
	db, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = newEnv(t, db, servertest.NewKEK(t), 0)
	for i := range n {
		m := newMerchant(t, db, fmt.Sprintf("Shop%d", i))
		if i%2 == 0 {
			e.mustSet(t, m, "fake", liveConfig)
		}
		merchants = append(merchants, m)
	}
	e.refresh(t)
	return e, merchants, func() { db.Close() }
}

// BenchmarkForMerchant is the cost ForMerchant adds to every payment, with 1,000 merchants of which
// half are on an account, from every core at once; the database is closed, so it does no I/O.
func BenchmarkForMerchant(b *testing.B) {
	e, ms, closeDB := loaded(b, 1000)
	closeDB()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := e.ForMerchant(ctx, ms[i%len(ms)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

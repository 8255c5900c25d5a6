// Package accounts keeps the merchants' processor accounts: which processor takes
// each merchant's new payments, configured by JSON that is stored sealed under the key-encryption
// key, and the processor of every account that ever took a transaction, for its captures, refunds,
// voids and recovery. A merchant without an account is on the built-in simulator.
//
// Accounts are never changed: a merchant that changes processor gets a new account, and the
// transactions of the old one keep going where they went. Each node keeps in memory which account
// each merchant is on, and refreshes it every RefreshInterval by reading only the merchants whose
// processor changed since its last refresh.
package accounts

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
)

// SimulatorKind is the name of the built-in simulator's kind. A merchant set to it has no account:
// its payments go to the simulator (Config.Simulator), as every merchant's do by default.
const SimulatorKind = "simulator"

// DefaultRefreshInterval is how often a node reads the processor changes made elsewhere (by another
// node or the operator CLI), so that a change of processor takes effect on every node within 5
// seconds.
const DefaultRefreshInterval = 5 * time.Second

// changeWindow is how far back of the newest change a refresh reads again. Changes are stamped in
// the order their transactions ran, not the order they committed: one that committed just after a
// refresh may carry a stamp a little below the newest that refresh saw. A processor change commits in
// milliseconds; a minute covers any of them, and re-reads only the few merchants changed in it.
const changeWindow = time.Minute

// ErrNotLoaded is ForMerchant's answer before the first Refresh: no node may send a payment to the
// simulator because it has not yet read that the merchant is on a live acquirer.
var ErrNotLoaded = errors.New("accounts: the merchants' processor accounts are not loaded yet")

// Config configures a Service.
type Config struct {
	DB *store.DB
	// Keyring seals each account's configuration (it holds API keys and terminal ids).
	Keyring *envelope.Keyring
	// Kinds are the connectors a merchant can be connected to, beside the simulator, which is always
	// known (SimulatorKind).
	Kinds []processor.Kind
	// Simulator is the built-in simulator: the processor of every merchant without an account.
	Simulator processor.Processor
	Now       func() time.Time // default time.Now
	Logger    *slog.Logger     // default slog.Default()
	// RefreshInterval is how often Run reads the changes made elsewhere (default and at most
	// DefaultRefreshInterval).
	RefreshInterval time.Duration
}

// Service sets merchants' processors and answers which processor takes a payment.
type Service struct {
	db        *store.DB
	keyring   *envelope.Keyring
	kinds     map[string]processor.Kind
	names     []string // the kinds' names, sorted, for messages
	simulator processor.Account
	now       func() time.Time
	log       *slog.Logger
	interval  time.Duration

	// current maps each merchant on an account to it; ForMerchant reads it without a lock.
	current atomic.Pointer[map[string]opened]

	refreshing sync.Mutex // serializes Refresh, and guards since
	since      int64      // the newest processor_changed_at read so far

	mu    sync.RWMutex // guards open
	opens sync.Mutex   // serializes the opening of accounts, so that each is opened once
	open  map[string]processor.Account
}

// opened is a merchant's account, or why it could not be opened on this node.
type opened struct {
	account processor.Account
	err     error
}

// New returns a Service. It reads nothing: a server calls Refresh before it takes payments, then Run.
// Kinds must have distinct names, none of them SimulatorKind.
func New(cfg Config) *Service {
	s := &Service{db: cfg.DB, keyring: cfg.Keyring, kinds: map[string]processor.Kind{}, now: cfg.Now, log: cfg.Logger,
		interval: cfg.RefreshInterval, open: map[string]processor.Account{},
		simulator: processor.Account{ID: "", Kind: SimulatorKind, Test: true, Processor: cfg.Simulator}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.interval <= 0 || s.interval > DefaultRefreshInterval {
		s.interval = DefaultRefreshInterval
	}
	for _, k := range append([]processor.Kind{simulatorKind{cfg.Simulator}}, cfg.Kinds...) {
		if _, twice := s.kinds[k.Name()]; twice {
			panic("accounts: two kinds named " + k.Name())
		}
		s.kinds[k.Name()] = k
		s.names = append(s.names, k.Name())
	}
	slices.Sort(s.names)
	return s
}

// Summary is what may be shown of a merchant's processor: never a secret.
type Summary struct {
	Name     string            `json:"name"`              // the kind: "simulator", "iso8583", "stripe", …
	Account  string            `json:"account,omitempty"` // the account's id; none for the simulator
	Test     bool              `json:"test"`              // nothing it takes moves money
	Settings map[string]string `json:"settings"`          // the configuration's non-secret fields
}

// Set connects the merchant to a processor of kind configured by config (JSON; empty for none), in
// the caller's transaction, and returns what may be shown of it. The configuration is validated by
// the kind, sealed, and stored as a new account; the merchant's earlier account is left as it is, for
// the transactions it took. Kind SimulatorKind puts the merchant back on the simulator. Errors name
// what is wrong without quoting the configuration; an unknown merchant is merchant.ErrNotFound.
func (s *Service) Set(ctx context.Context, tx *store.Tx, merchantID, kind string, config []byte) (Summary, error) {
	k, ok := s.kinds[kind]
	if !ok {
		return Summary{}, fault.Invalid("processor", "processor must be one of %s, not %q", strings.Join(s.names, ", "), kind)
	}
	if len(bytes.TrimSpace(config)) == 0 {
		config = []byte("{}")
	}
	// A syntax error's message may quote the text at fault; its offset names the place without it.
	var syntax *json.SyntaxError
	if err := json.Unmarshal(config, new(any)); errors.As(err, &syntax) {
		return Summary{}, fault.Invalid("processor_config", "the %s configuration is not valid JSON (at byte %d)", kind, syntax.Offset)
	} else if err != nil {
		return Summary{}, fault.Invalid("processor_config", "the %s configuration is not valid JSON", kind)
	}
	settings, err := k.Parse(config)
	if err != nil {
		return Summary{}, fault.Invalid("processor_config", "the %s configuration: %s", kind, err)
	}
	if settings.Fields == nil {
		settings.Fields = map[string]string{}
	}
	out := Summary{Name: kind, Test: settings.Test, Settings: settings.Fields}
	stamp, err := s.stamp(ctx, tx)
	if err != nil {
		return Summary{}, err
	}
	if kind == SimulatorKind {
		res, err := tx.ExecContext(ctx, `UPDATE merchants SET processor_account = NULL, processor_changed_at = $2 WHERE id = $1`, merchantID, stamp)
		if err != nil {
			return Summary{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return Summary{}, errors.Join(merchant.ErrNotFound, err)
		}
		return out, nil
	}
	out.Account = "pa_" + rand.Text()[:24]
	shown, err := json.Marshal(settings.Fields)
	if err != nil {
		return Summary{}, err
	}
	// The configuration is sealed bound to the account's id: a sealed configuration copied onto
	// another account does not open.
	res, err := tx.ExecContext(ctx, `INSERT INTO processor_accounts (id, merchant_id, kind, config, settings, test, created_at)
		SELECT $1, id, $3, $4, $5, $6, $7 FROM merchants WHERE id = $2`,
		out.Account, merchantID, kind, s.keyring.Seal(config, configAAD(out.Account)), string(shown), settings.Test, s.now().UnixMilli())
	if err != nil {
		return Summary{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return Summary{}, errors.Join(merchant.ErrNotFound, err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE merchants SET processor_account = $2, processor_changed_at = $3 WHERE id = $1`, merchantID, out.Account, stamp)
	return out, err
}

// stamp is the processor_changed_at of a change made now: the time, or just after the newest change
// when that is later (a writer whose clock is behind must not stamp its change below what the nodes
// have read already, or they would never read it).
func (s *Service) stamp(ctx context.Context, tx *store.Tx) (int64, error) {
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(processor_changed_at), 0) FROM merchants`).Scan(&newest); err != nil {
		return 0, err
	}
	return max(s.now().UnixMilli(), newest+1), nil
}

func configAAD(account string) []byte { return []byte("kassa processor account\x00" + account) }

// Describe returns what may be shown of the merchant's processor; merchant.ErrNotFound for an
// unknown merchant.
func Describe(ctx context.Context, q store.Querier, merchantID string) (Summary, error) {
	var account, kind, settings sql.NullString
	var test sql.NullBool
	err := q.QueryRowContext(ctx, `SELECT m.processor_account, a.kind, a.settings, a.test FROM merchants m
		LEFT JOIN processor_accounts a ON a.id = m.processor_account WHERE m.id = $1`, merchantID).Scan(&account, &kind, &settings, &test)
	if errors.Is(err, sql.ErrNoRows) {
		return Summary{}, merchant.ErrNotFound
	}
	if err != nil {
		return Summary{}, err
	}
	if !account.Valid {
		return Summary{Name: SimulatorKind, Test: true, Settings: map[string]string{}}, nil
	}
	out := Summary{Name: kind.String, Account: account.String, Test: test.Bool}
	return out, json.Unmarshal([]byte(settings.String), &out.Settings)
}

// ForMerchant returns the account that takes the merchant's new payments: its own, or the simulator's.
// It runs on every payment and reads only memory. An account that this node could not open (a kind
// this build does not have, a configuration that does not open) is an error, never the simulator:
// a payment meant for a live acquirer must not be approved by the simulator.
func (s *Service) ForMerchant(ctx context.Context, merchantID string) (processor.Account, error) {
	m := s.current.Load()
	if m == nil {
		return processor.Account{}, ErrNotLoaded
	}
	if o, ok := (*m)[merchantID]; ok {
		return o.account, o.err
	}
	return s.simulator, nil
}

// Account returns the account id, which took a transaction ("" is the simulator's), for its
// follow-ups and recovery: opened the first time it is asked for, and kept.
func (s *Service) Account(ctx context.Context, id string) (processor.Account, error) {
	if id == "" {
		return s.simulator, nil
	}
	s.mu.RLock()
	a, ok := s.open[id]
	s.mu.RUnlock()
	if ok {
		return a, nil
	}
	s.opens.Lock()
	defer s.opens.Unlock()
	s.mu.RLock()
	a, ok = s.open[id]
	s.mu.RUnlock()
	if ok {
		return a, nil
	}
	a, err := s.openAccount(ctx, id)
	if err != nil {
		return processor.Account{}, err
	}
	s.mu.Lock()
	s.open[id] = a
	s.mu.Unlock()
	return a, nil
}

// openAccount reads the account id, unseals its configuration and opens its processor.
func (s *Service) openAccount(ctx context.Context, id string) (processor.Account, error) {
	a := processor.Account{ID: id}
	var sealed []byte
	err := s.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT kind, config, test FROM processor_accounts WHERE id = $1`, id).Scan(&a.Kind, &sealed, &a.Test)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return processor.Account{}, fmt.Errorf("accounts: no processor account %s", id)
	}
	if err != nil {
		return processor.Account{}, err
	}
	k, ok := s.kinds[a.Kind]
	if !ok {
		return processor.Account{}, fmt.Errorf("accounts: account %s is of kind %q, which this build of Kassa does not have", id, a.Kind)
	}
	config, err := s.keyring.Open(sealed, configAAD(id))
	if err != nil {
		return processor.Account{}, fmt.Errorf("accounts: the configuration of account %s: %w", id, err)
	}
	if a.Processor, err = k.Open(config); err != nil {
		return processor.Account{}, fmt.Errorf("accounts: open account %s (%s): %w", id, a.Kind, err)
	}
	return a, nil
}

// Run refreshes the merchants' accounts every RefreshInterval until ctx is done.
func (s *Service) Run(ctx context.Context) {
	clock.Every(ctx, s.interval, s.log, "refresh processor accounts", s.Refresh)
}

// Refresh reads the merchants whose processor changed since the last refresh (every merchant that
// ever changed, the first time), opens the accounts new to this node, and retries those it could not
// open before.
func (s *Service) Refresh(ctx context.Context) error {
	s.refreshing.Lock()
	defer s.refreshing.Unlock()
	type change struct {
		merchant string
		account  sql.NullString
	}
	var changes []change
	newest := s.since
	err := s.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT id, processor_account, processor_changed_at FROM merchants WHERE processor_changed_at > $1`,
			max(0, s.since-changeWindow.Milliseconds()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c change
			var at int64
			if err := rows.Scan(&c.merchant, &c.account, &at); err != nil {
				return err
			}
			changes = append(changes, c)
			newest = max(newest, at)
		}
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("accounts: refresh: %w", err)
	}
	old := s.current.Load()
	var cur map[string]opened
	if old != nil {
		cur = *old
	}
	// The map ForMerchant reads is never written: a refresh that changes anything publishes a copy.
	next, copied := cur, false
	edit := func() {
		if !copied {
			next, copied = make(map[string]opened, len(cur)+len(changes)), true
			maps.Copy(next, cur)
		}
	}
	for m, o := range cur {
		if o.err != nil {
			edit()
			next[m] = s.openFor(ctx, m, o.account.ID)
		}
	}
	for _, c := range changes {
		o, on := next[c.merchant]
		switch {
		case !c.account.Valid && on:
			edit()
			delete(next, c.merchant)
		case c.account.Valid && (!on || o.account.ID != c.account.String):
			edit()
			next[c.merchant] = s.openFor(ctx, c.merchant, c.account.String)
		}
	}
	if old == nil || copied {
		if next == nil {
			next = map[string]opened{}
		}
		s.current.Store(&next)
	}
	s.since = newest
	return nil
}

// openFor opens the merchant's account, logging a failure: the merchant's payments fail until a
// refresh opens it.
func (s *Service) openFor(ctx context.Context, merchantID, id string) opened {
	a, err := s.Account(ctx, id)
	if err != nil {
		s.log.ErrorContext(ctx, "a merchant's processor account does not open; its payments fail", "merchant_id", merchantID, "account", id, "err", err)
		return opened{account: processor.Account{ID: id}, err: err}
	}
	return opened{account: a}
}

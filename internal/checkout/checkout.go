// Package checkout is the v1 payments API (hosted-payment-page-api.md; wire-contract.md, "Hosted
// payment page"): API keys, the account they act for, and payment intents — one payment from creation
// to its end, whose every money operation is a transaction of the payments core — with their refunds. Payment methods live
// in the vault; this package serves them on the v1 API. Hosted-page sessions build on the service
// methods here (Create, Confirm, CompleteChallenge, …), which take the caller and, for a
// confirmation, the source and whether the cardholder can be shown a 3-D Secure challenge.
package checkout

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/idempotency"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
)

// DefaultKeyCacheTTL is how long an API key is served from memory before it is read again: the most a
// key deleted on another node keeps working here.
const DefaultKeyCacheTTL = 5 * time.Second

// Config configures a Service.
type Config struct {
	DB          *store.DB
	Ledger      *payment.Ledger
	Vault       *vault.Service
	Merchants   *merchant.Cache
	Idempotency *idempotency.Store
	Logger      *slog.Logger
	Now         func() time.Time
	// KeyCacheTTL is how long API keys are served from memory (default 5 s).
	KeyCacheTTL time.Duration
	// ProcessorTimeout bounds one processor call (default payment.DefaultProcessorTimeout). An
	// operation on an intent that has run twice as long is presumed dead, like a ledger attempt.
	ProcessorTimeout time.Duration
	// Velocity limits the request rate of each key and the failed confirmations of each intent
	// (required).
	Velocity *velocity.Limiter
}

// Service is the v1 payments API.
type Service struct {
	db        *store.DB
	ledger    *payment.Ledger
	vault     *vault.Service
	merchants *merchant.Cache
	idem      *idempotency.Store
	log       *slog.Logger
	now       func() time.Time
	keys      *keyCache
	lease     time.Duration
	velocity  *velocity.Limiter
	succeeded []SucceededFunc
}

// SucceededFunc is told of a charge that took an intent to succeeded, in the transaction that records
// it on the intent: t is the ledger's approved sale. An error undoes that transaction, to be tried
// again (by the request, or the sweep that settles abandoned operations).
type SucceededFunc func(ctx context.Context, tx *store.Tx, in Intent, t payment.Transaction) error

// OnSucceeded adds f to what settling a succeeded charge does in its transaction (the invoice service
// marks its invoice PAID so, in the transaction that records the payment). Called while the server is
// built, before it serves.
func (s *Service) OnSucceeded(f SucceededFunc) { s.succeeded = append(s.succeeded, f) }

// New returns the service.
func New(cfg Config) *Service {
	s := &Service{db: cfg.DB, ledger: cfg.Ledger, vault: cfg.Vault, merchants: cfg.Merchants, idem: cfg.Idempotency,
		log: cfg.Logger, now: cfg.Now, velocity: cfg.Velocity}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	ttl := cfg.KeyCacheTTL
	if ttl <= 0 {
		ttl = DefaultKeyCacheTTL
	}
	s.keys = &keyCache{db: cfg.DB, ttl: ttl, now: s.now, keys: map[[32]byte]cachedKey{}, partners: map[[2]string]cachedScopes{}}
	timeout := cfg.ProcessorTimeout
	if timeout <= 0 {
		timeout = payment.DefaultProcessorTimeout
	}
	s.lease = 2 * timeout
	return s
}

// Routes registers the v1 API. Each route names the permission it needs.
func (s *Service) Routes(r *httpapi.Router) {
	h := func(p Permissions, f http.HandlerFunc) http.Handler { return s.Protect(p, f) }
	r.Handle("GET", "/v1/api-keys", h(APIKeysRead, s.handleListKeys))
	r.Handle("POST", "/v1/api-keys", h(APIKeysWrite, s.handleCreateKey))
	r.Handle("DELETE", "/v1/api-keys/{id}", h(APIKeysWrite, s.handleDeleteKey))
	r.Handle("POST", "/v1/payment-methods", h(PaymentMethodsWrite, s.handleCreatePaymentMethod))
	r.Handle("GET", "/v1/payment-methods/{id}", h(PaymentMethodsRead, s.handleGetPaymentMethod))
	r.Handle("POST", "/v1/payment-intents", h(PaymentIntentsWrite, s.handleCreateIntent))
	r.Handle("GET", "/v1/payment-intents", h(PaymentIntentsRead, s.handleListIntents))
	r.Handle("GET", "/v1/payment-intents/{id}", h(PaymentIntentsRead, s.handleGetIntent))
	r.Handle("PATCH", "/v1/payment-intents/{id}", h(PaymentIntentsWrite, s.handleUpdateIntent))
	r.Handle("POST", "/v1/payment-intents/{id}/confirm", h(PaymentIntentsWrite, s.handleConfirm))
	r.Handle("POST", "/v1/payment-intents/{id}/capture", h(PaymentIntentsWrite, s.handleCapture))
	r.Handle("POST", "/v1/payment-intents/{id}/cancel", h(PaymentIntentsWrite, s.handleCancel))
	r.Handle("POST", "/v1/refunds", h(RefundsWrite, s.handleCreateRefund))
	r.Handle("GET", "/v1/refunds", h(RefundsRead, s.handleListRefunds))
	r.Handle("GET", "/v1/refunds/{id}", h(RefundsRead, s.handleGetRefund))
}

// Sweep does the periodic expiry of the v1 API: it deletes the sealed card numbers of payment methods
// that expired unused, and ends the 3-D Secure challenges that nobody completed (ChallengeLifetime).
func (s *Service) Sweep(ctx context.Context) error {
	if _, err := s.vault.ExpireMethods(ctx); err != nil {
		return err
	}
	return s.expireChallenges(ctx)
}

// Recover settles the operations on intents whose node died while running them (their lease ran
// out), from the ledger: the intents' part of recovery, run as often as the ledger's.
func (s *Service) Recover(ctx context.Context) error {
	_, err := s.settleAbandoned(ctx)
	return err
}

package merchant

import (
	"context"
	"sync"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Cache serves merchants from memory for the hot path, reading each from the database at most once
// per TTL. A change made by the operator CLI (another process) is seen within the TTL.
type Cache struct {
	db  *store.DB
	ttl time.Duration
	now func() time.Time

	mu sync.RWMutex
	m  map[string]cached
}

type cached struct {
	m       Merchant
	fetched time.Time
}

// DefaultCacheTTL is how long a cached merchant is served before it is read again.
const DefaultCacheTTL = 5 * time.Second

// NewCache returns a cache reading from db.
func NewCache(db *store.DB, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{db: db, ttl: ttl, now: now, m: map[string]cached{}}
}

// Get returns the merchant with id, from memory when it was read less than a TTL ago.
func (c *Cache) Get(ctx context.Context, id string) (Merchant, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.m[id]
	c.mu.RUnlock()
	if ok && now.Sub(e.fetched) < c.ttl {
		return e.m, nil
	}
	var m Merchant
	err := c.db.Read(ctx, func(q store.Querier) error {
		var err error
		m, err = Get(ctx, q, id)
		return err
	})
	if err != nil {
		return Merchant{}, err
	}
	c.mu.Lock()
	c.m[id] = cached{m: m, fetched: now}
	c.mu.Unlock()
	return m, nil
}

// Forget drops the merchant with id from memory, so that the next Get on this node reads what a
// change just stored; other nodes see it within the TTL.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

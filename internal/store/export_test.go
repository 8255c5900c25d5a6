package store

import (
	"context"
	"strings"

	"github.com/pressly/goose/v3"
)

// MigrateTo applies the embedded migrations up to version, for tests of an upgrade from it.
func (db *DB) MigrateTo(ctx context.Context, version int64) error {
	return db.migrate(ctx, func(p *goose.Provider) error {
		_, err := p.UpTo(ctx, version)
		return err
	})
}

// ForgetNestedWrites forgets the nested writes found on goroutines whose stack holds marker (a test's
// name), which provoked them on purpose, so that storetest.Main does not fail the run for them.
func ForgetNestedWrites(marker string) {
	nestedSeen.Lock()
	defer nestedSeen.Unlock()
	kept := nestedSeen.errs[:0]
	for _, e := range nestedSeen.errs {
		if !strings.Contains(e.Stack, marker) {
			kept = append(kept, e)
		}
	}
	nestedSeen.errs = kept
}

package store

import (
	"context"

	"github.com/pressly/goose/v3"
)

// MigrateTo applies the embedded migrations up to version, for tests of an upgrade from it.
func (db *DB) MigrateTo(ctx context.Context, version int64) error {
	return db.migrate(ctx, func(p *goose.Provider) error {
		_, err := p.UpTo(ctx, version)
		return err
	})
}

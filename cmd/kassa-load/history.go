package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/kassapay/kassa/internal/report"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/synth"
)

// What the benchmarks that need a merchant's long history share (the dashboard's, dashboard.go, and
// the scale of data's, scale.go): where a database of the environment is, and how a history is
// loaded into it.

// storeConfig is the store configuration of the database called name: the database dbArgs(name)
// gives kassa serve.
func (e *environment) storeConfig(name string) store.Config {
	args := e.dbArgs(name)
	if args[0] == "--database-url" {
		return store.Config{DatabaseURL: args[1]}
	}
	return store.Config{DataDir: args[1]}
}

// createDatabase makes the database called name of a PostgreSQL environment, which must exist before
// kassa opens it (newEnvironment makes "api" and "ceiling"); SQLite's is made by kassa itself.
func (e *environment) createDatabase(ctx context.Context, name string) error {
	if e.url == "" {
		return nil
	}
	db, err := sql.Open("pgx", e.url)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE kassa_"+name)
	return err
}

// loadHistory bulk-loads the history o describes with package synth (no server may be writing to db
// meanwhile), then brings the overview's rollup (internal/report) up to date with it, as the
// server's roller would have kept it while the history was made: a server started on the loaded
// database does not spend its first minutes rolling millions of rows up. It returns what was loaded
// and how long it all took.
func loadHistory(ctx context.Context, db *store.DB, o synth.Options) (synth.Summary, time.Duration, error) {
	start := time.Now()
	sum, err := synth.Load(ctx, db, o)
	if err != nil {
		return synth.Summary{}, 0, fmt.Errorf("load: %w", err)
	}
	if err := report.NewRoller(report.RollerConfig{DB: db}).CatchUp(ctx); err != nil {
		return synth.Summary{}, 0, fmt.Errorf("roll the overview up: %w", err)
	}
	return sum, time.Since(start), nil
}

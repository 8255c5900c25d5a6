//go:build !linux

package store

import (
	"syscall"
	"time"
)

// userTimeout does nothing where TCP_USER_TIMEOUT does not exist: keepalive alone detects a peer gone.
func userTimeout(syscall.RawConn, time.Duration) error { return nil }

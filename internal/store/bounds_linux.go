package store

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout sets TCP_USER_TIMEOUT on c: the kernel closes the socket when data it sent stays
// unacknowledged for d, which keepalive alone does not do while a write is outstanding.
func userTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

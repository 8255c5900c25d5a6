package store

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// Writes inside writes.
//
// A write's callback must not begin another write of the same database. On SQLite the callback runs
// on the batcher's goroutine, inside the batch's transaction, and a write it begins is queued to that
// same goroutine, which never gets to it: the callback waits for itself, and so does every later write
// of the server. On PostgreSQL the inner write takes another connection and another turn at the write
// gate while the outer one holds its own: as many such writes at once as the gate admits wait for
// each other for ever, and the two transactions may wait on each other's row locks.
//
// Tests turn the check below on (storetest does, for every test binary that uses it): DB.Write,
// DB.Exec, DB.QueryRow and DB.Migrate then panic when they are called from a goroutine that is running
// a write's callback of the same database, instead of hanging. In production it is off, and costs the
// load of one bool.

var checkNested atomic.Bool

// CheckNestedWrites turns on (or off) the check that no write of a database begins inside a write
// of the same database; see nested.go. It is for tests.
func CheckNestedWrites(on bool) { checkNested.Store(on) }

// NestedWriteError is the value the check panics with.
type NestedWriteError struct {
	Call  string // the entry that was called inside the write: "Write", "Exec", ...
	Stack string // the goroutine's stack at that call
}

func (e *NestedWriteError) Error() string {
	return "store: a write begun inside a write of the same database waits for itself on SQLite: " +
		"DB." + e.Call + " was called from inside a DB.Write callback (do it before or after the write, or use its tx)\n" + e.Stack
}

var nestedSeen struct {
	sync.Mutex
	errs []*NestedWriteError
}

// NestedWrites are the nested writes the check found since the process started, even those whose
// panic something recovered (an HTTP handler's middleware, say): storetest.Main fails the run with them.
func NestedWrites() []*NestedWriteError {
	nestedSeen.Lock()
	defer nestedSeen.Unlock()
	return append([]*NestedWriteError(nil), nestedSeen.errs...)
}

// writing is the set of goroutines running a write's callback of one database, kept while the check
// is on.
type writing struct {
	mu sync.Mutex
	g  map[uint64]int
}

// enter marks the current goroutine as running a write's callback; the returned function unmarks it.
// It is nil when the check is off.
func (db *DB) enterWrite() func() {
	if !checkNested.Load() {
		return nil
	}
	id := goid()
	w := &db.writing
	w.mu.Lock()
	if w.g == nil {
		w.g = map[uint64]int{}
	}
	w.g[id]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.g[id]--; w.g[id] <= 0 {
			delete(w.g, id)
		}
		w.mu.Unlock()
	}
}

// notInWrite panics with a *NestedWriteError when the check is on and the current goroutine is
// running a write's callback of db.
func (db *DB) notInWrite(call string) {
	if !checkNested.Load() {
		return
	}
	id := goid()
	db.writing.mu.Lock()
	in := db.writing.g[id] > 0
	db.writing.mu.Unlock()
	if !in {
		return
	}
	buf := make([]byte, 64<<10)
	e := &NestedWriteError{Call: call, Stack: string(buf[:runtime.Stack(buf, false)])}
	nestedSeen.Lock()
	nestedSeen.errs = append(nestedSeen.errs, e)
	nestedSeen.Unlock()
	panic(e)
}

// goid is the current goroutine's id, from the first line of its stack: "goroutine 42 [running]:".
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("store: cannot read the goroutine's id from %q", buf[:]))
	}
	return id
}

// Package pgproxy is a TCP proxy between PostgreSQL clients and a server that a test or a failure
// drill controls: it forwards, resets every connection, hangs (stops forwarding both ways and keeps
// every socket open and silent, as a primary whose processes are stopped does), and cuts a connection
// after the client sent a commit and before the server's answer reached it, with the commit applied
// or not.
//
// It speaks just enough of the protocol to see statements: the client's simple queries (Q), and the
// statements its extended-protocol Bind messages run (named by their Parse). It refuses SSL and GSS
// encryption itself, so the connection through it is plain: point clients at it with sslmode=disable
// or prefer.
//
//	p, _ := pgproxy.Start("unix", "/tmp/kassa-pg-x/.s.PGSQL.5432")
//	defer p.Close()
//	url := "postgres://kassa@" + p.Addr() + "/kassa?sslmode=disable"
//	p.Hang()    // the server "hangs"; new connections are accepted and hang too
//	p.Forward() // and resumes: the held messages go on
//	p.CutAt(pgproxy.IsCommit, true) // the next COMMIT reaches the server, its answer never the client
package pgproxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"regexp"
	"sync"
)

// Proxy forwards the connections made to its address to the server.
type Proxy struct {
	network, address string
	ln               net.Listener
	dial             func(network, address string) (net.Conn, error) // net.Dial; a test's own to hold the proxy's writes

	mu     sync.Mutex
	resume chan struct{} // closed while forwarding; open while hung
	conns  map[*pair]struct{}
	cut    *cut
	cuts   int
	closed bool
	wg     sync.WaitGroup
}

// cut is an armed cut: the first statement that match accepts is cut after, and applied (forwarded to
// the server, whose answer is then dropped) or not.
type cut struct {
	match func(query string) bool
	apply bool
}

// Start listens on a loopback port and forwards each connection to the server at network and address
// ("unix" and the socket's path, or "tcp" and host:port).
func Start(network, address string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{network: network, address: address, ln: ln, dial: net.Dial, resume: make(chan struct{}),
		conns: map[*pair]struct{}{}}
	close(p.resume)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, host:port, for the client's URL.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hang stops forwarding, both ways, on every connection, new ones included, until Forward: sockets
// stay open, and nothing arrives on them.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resume:
		p.resume = make(chan struct{})
	default:
	}
}

// Forward forwards again after Hang: what was held goes on.
func (p *Proxy) Forward() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resume:
	default:
		close(p.resume)
	}
}

// Reset closes every connection, the client's with a TCP reset; new connections are forwarded.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*pair]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.close(true)
	}
}

// CutAt arms a cut of the first connection whose client then runs a statement that match accepts (a
// simple query, or the statement an extended-protocol Bind runs): the proxy forwards the client's
// messages up to that one (up to its Sync, for the extended protocol, which ends an implicit
// transaction with its commit) and, with apply, that one too, then waits for the server to answer
// it, drops the answer and closes both sides; without apply it drops the statement and closes both
// sides at once, and the server rolls the transaction back. IsCommit matches an explicit COMMIT; a
// single statement outside a transaction commits at its Sync, so match the statement itself.
func (p *Proxy) CutAt(match func(query string) bool, apply bool) {
	p.mu.Lock()
	p.cut = &cut{match: match, apply: apply}
	p.mu.Unlock()
}

// Cuts counts the connections cut so far.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

var commit = regexp.MustCompile(`(?i)^\s*(commit|end)\b`)

// IsCommit reports whether query commits an explicit transaction.
func IsCommit(query string) bool { return commit.MatchString(query) }

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.Forward()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		pr := &pair{p: p, client: c, stmts: map[string]string{}, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pr.run()
		}()
	}
}

// wait blocks while the proxy hangs; false when the connection was closed meanwhile.
func (p *Proxy) wait(pr *pair) bool {
	p.mu.Lock()
	resume := p.resume
	p.mu.Unlock()
	select {
	case <-resume:
		return true
	case <-pr.done:
		return false
	}
}

// take disarms and returns the armed cut if query matches it.
func (p *Proxy) take(query string) *cut {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == nil || !p.cut.match(query) {
		return nil
	}
	c := p.cut
	p.cut = nil
	p.cuts++
	return c
}

// pair is one client connection and its connection to the server.
type pair struct {
	p              *Proxy
	client, server net.Conn
	stmts          map[string]string // the client's prepared statements' text, by name
	once           sync.Once
	done           chan struct{}
	cutting        chan struct{} // closed when an applied cut's statement was forwarded
	pending        *cut          // a cut waiting for the Sync of the statement it matched
}

func (c *pair) close(reset bool) {
	c.once.Do(func() {
		if tc, ok := c.client.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		c.client.Close()
		c.p.mu.Lock()
		server := c.server
		c.p.mu.Unlock()
		if server != nil {
			server.Close()
		}
		close(c.done)
	})
}

func (c *pair) run() {
	defer func() {
		c.close(false)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	// The startup: SSL and GSS encryption requests are refused here; the startup message, or a
	// cancel request, goes to the server.
	var startup []byte
	for {
		msg, err := readUntyped(c.client)
		if err != nil {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest
			if _, err := c.client.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		startup = msg
		break
	}
	if !c.p.wait(c) {
		return
	}
	c.p.mu.Lock()
	dial := c.p.dial
	c.p.mu.Unlock()
	server, err := dial(c.p.network, c.p.address)
	if err != nil {
		return
	}
	c.p.mu.Lock()
	c.server = server
	c.p.mu.Unlock()
	select {
	case <-c.done: // closed while dialing
		server.Close()
		return
	default:
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	c.cutting = make(chan struct{})
	go c.fromServer()
	c.fromClient()
}

// fromClient forwards the client's messages, watching for the statement of an armed cut.
func (c *pair) fromClient() {
	for {
		typ, msg, err := readTyped(c.client)
		if err != nil {
			return
		}
		if !c.p.wait(c) {
			return
		}
		var hit *cut
		switch typ {
		case 'Q':
			hit = c.p.take(cstring(msg[5:]))
		case 'P':
			name := cstring(msg[5:])
			c.stmts[name] = cstring(msg[5+len(name)+1:])
		case 'B':
			portal := cstring(msg[5:])
			stmt := cstring(msg[5+len(portal)+1:])
			if c.pending == nil {
				c.pending = c.p.take(c.stmts[stmt])
			}
		case 'S':
			hit, c.pending = c.pending, nil
		}
		if hit != nil && !hit.apply {
			return // dropped: the server sees the connection end inside the transaction
		}
		if hit != nil {
			// The answer is dropped from before the statement leaves: once written, the server may
			// answer before this goroutine runs again, and fromServer would forward that answer.
			close(c.cutting)
		}
		if _, err := c.server.Write(msg); err != nil {
			return
		}
		if hit != nil {
			<-c.done // fromServer closes once the server answered
			return
		}
	}
}

// fromServer forwards the server's messages; after an applied cut's statement it waits for the
// server's ReadyForQuery, which follows the commit, and closes both sides without forwarding it.
func (c *pair) fromServer() {
	defer c.close(false)
	for {
		typ, msg, err := readTyped(c.server)
		if err != nil {
			return
		}
		select {
		case <-c.cutting:
			if typ == 'Z' {
				return
			}
			continue
		default:
		}
		if !c.p.wait(c) {
			return
		}
		select {
		case <-c.cutting:
			if typ == 'Z' {
				return
			}
			continue
		default:
		}
		if _, err := c.client.Write(msg); err != nil {
			return
		}
	}
}

// readUntyped reads a startup-phase message: its length, then the rest.
func readUntyped(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < 8 || n > 1<<20 {
		return nil, errors.New("pgproxy: bad startup message")
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readTyped reads a message of type, length and body, returning the whole of it.
func readTyped(r io.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("pgproxy: bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return head[0], msg, err
}

// cstring is the NUL-terminated string b starts with.
func cstring(b []byte) string {
	for i, x := range b {
		if x == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

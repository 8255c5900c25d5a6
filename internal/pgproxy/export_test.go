package pgproxy

import "net"

// SetDial makes p reach its server through dial, for connections made from now on: a test's way to
// hold the proxy's goroutine that writes to the server at a point of its choosing.
func (p *Proxy) SetDial(dial func(network, address string) (net.Conn, error)) {
	p.mu.Lock()
	p.dial = dial
	p.mu.Unlock()
}

// Package tcpproxy puts a TCP proxy on loopback in front of a real server
// (PostgreSQL, Redis, an SMTP relay), so that a test can make the peer slow
// or unreachable the way a network does: Hold holds every byte in both
// directions until the test resumes it, Cut drops every connection and
// refuses new ones until Heal. The server itself is never mocked.
package tcpproxy

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards connections to one target. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	held  chan struct{} // closed when a Hold ends; nil when none
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start listens on 127.0.0.1:0 and forwards to target ("host:port", or a
// unix socket's path, starting with "/"); the
// proxy stops with the test.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold holds every byte, both ways, on every connection, until resume is
// called: the peer looks alive but answers nothing, for exactly as long as
// the test says and not for a time a loaded machine may outlast.
func (p *Proxy) Hold() (resume func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
	return p.resume
}

func (p *Proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// Cut closes every connection and refuses new ones until Heal: the peer is
// unreachable.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Heal accepts connections again after Cut.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.resume()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		network := "tcp"
		if strings.HasPrefix(p.target, "/") {
			network = "unix"
		}
		up, err := net.Dial(network, p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// track registers both ends, unless the proxy was cut meanwhile.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding each chunk while the proxy is held.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitHeld()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: close both ends
		}
	}
}

func (p *Proxy) waitHeld() {
	for {
		p.mu.Lock()
		held := p.held
		p.mu.Unlock()
		if held == nil {
			return
		}
		<-held
	}
}

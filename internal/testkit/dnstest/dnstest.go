// Package dnstest answers a test binary's name lookups from a DNS server
// on loopback that knows no name, so that a test of an unknown host meets
// a real DNS failure (NXDOMAIN through Go's resolver) without a packet
// leaving the machine, which make test's network guard would fail.
// /etc/hosts is still read first, so localhost resolves.
package dnstest

import (
	"context"
	"log"
	"net"
	"os"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// NXDOMAIN points net.DefaultResolver at a DNS server on loopback that
// answers every question "no such name", and returns the function that
// stops it. Call it from TestMain, before any test runs.
func NXDOMAIN() (stop func(), err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go answerNXDOMAIN(pc)
	net.DefaultResolver = &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", pc.LocalAddr().String())
		}}
	return func() { pc.Close() }, nil
}

// Main is a TestMain that runs m's tests with NXDOMAIN in place.
func Main(m *testing.M) {
	stop, err := NXDOMAIN()
	if err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// answerNXDOMAIN answers every query on pc: no such name.
func answerNXDOMAIN(pc net.PacketConn) {
	buf := make([]byte, 512)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		qs, err := p.AllQuestions()
		if err != nil {
			continue
		}
		h.Response, h.Authoritative, h.RecursionAvailable, h.RCode = true, true, true, dnsmessage.RCodeNameError
		b := dnsmessage.NewBuilder(nil, h)
		_ = b.StartQuestions()
		for _, q := range qs {
			_ = b.Question(q)
		}
		if out, err := b.Finish(); err == nil {
			_, _ = pc.WriteTo(out, addr)
		}
	}
}

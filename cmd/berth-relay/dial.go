//go:build linux

package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// dialMode connects to a loopback TCP port and copies stdin to it and it
// to stdout, so that a port inside a container with --network none can be
// reached through an exec. Each direction's end is passed on: stdin EOF
// half-closes the connection; the connection's EOF closes stdout. It
// returns when both have ended.
//
// With --ready it writes wire.ReadyLine to stderr once connected: a caller
// reading an exec's streams cannot otherwise tell a connection that is up
// (and silent, as a DAP server is until asked) from one still being made,
// and must report a refused connection as Dial's error.
func dialMode(args []string) int {
	ready := len(args) > 0 && args[0] == "--ready"
	if ready {
		args = args[1:]
	}
	if len(args) != 1 {
		return fail("dial: want one address\n%s", usage)
	}
	addr, err := loopbackAddr(args[0])
	if err != nil {
		return fail("dial: %v", err)
	}
	c, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth-relay: dial: %v\n", err)
		return 1
	}
	defer c.Close()
	if ready {
		fmt.Fprintln(os.Stderr, wire.ReadyLine)
	}
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(c, os.Stdin)
		_ = c.CloseWrite()
	}()
	_, _ = io.Copy(os.Stdout, c)
	os.Stdout.Close()
	<-up
	return 0
}

// loopbackAddr reads PORT, 127.0.0.1:PORT or [::1]:PORT. Only a literal
// loopback address is accepted: the relay is no general proxy.
func loopbackAddr(s string) (netip.AddrPort, error) {
	if port, err := strconv.ParseUint(s, 10, 16); err == nil {
		s = "127.0.0.1:" + strconv.FormatUint(port, 10)
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("%q is not PORT or a literal IP:PORT", s)
	}
	if !ap.Addr().IsLoopback() || ap.Port() == 0 {
		return ap, fmt.Errorf("%s: only a loopback address and a port other than 0 can be dialled", s)
	}
	return ap, nil
}

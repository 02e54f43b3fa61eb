package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// DialPort connects to a TCP port on the pod's loopback: plain loopback when
// Berth is the pod's sidecar (they share the network namespace), else a
// port-forward of its own. A refused connection is seen on the first read
// of a forwarded one (the kubelet answers the forward's streams before it
// connects, and says so on the error stream only when it cannot).
func (p *pod) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if p.sidecar {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("nothing accepts connections on 127.0.0.1:%d in %s (Berth is its sidecar): %v", port, p, err)
		}
		return c, nil
	}
	conn, _, err := p.forward(ctx, port)
	return conn, err
}

// forward opens a port-forward session for this one connection, since
// one failed forward closes the whole session: SPDY tunnelled through
// WebSocket, or plain SPDY when the API server refuses the upgrade. It
// returns the protocol that carried it.
func (p *pod) forward(ctx context.Context, port int) (net.Conn, string, error) {
	u := p.api.core.RESTClient().Post().Namespace(p.ns).Resource("pods").Name(p.name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(p.api.cfg)
	if err != nil {
		return nil, "", err
	}
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, "POST", u)
	tunnel, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, p.api.cfg)
	if err != nil {
		return nil, "", err
	}
	protocol := ProtocolWebSocket
	dialer := portforward.NewFallbackDialerForStreaming(tunnel, spdyDialer, p.fallback(&protocol))
	what := fmt.Sprintf("127.0.0.1:%d in %s", port, p)
	type dialed struct {
		sess httpstream.Connection
		err  error
	}
	ch := make(chan dialed, 1)
	go func() {
		sess, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		ch <- dialed{sess, err}
	}()
	var sess httpstream.Connection
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, "", p.failed(ctx, "port-forward to "+what, r.err)
		}
		sess = r.sess
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.sess != nil {
				r.sess.Close()
			}
		}()
		return nil, "", fmt.Errorf("connecting to %s: %w", what, ctx.Err())
	}
	c, err := newForwardConn(sess, port, what)
	if err != nil {
		sess.Close()
		return nil, "", p.failed(ctx, "port-forward to "+what, err)
	}
	return c, protocol, nil
}

// forwardConn is one forwarded connection, the only one of its session.
// Reads and writes go through a net.Pipe (which gives them deadlines) to
// the data stream; the kubelet's refusal, on the error stream, is the
// error of the read that finds the end.
type forwardConn struct {
	net.Conn // the caller's end of the pipe
	sess     httpstream.Connection
	refused  atomic.Pointer[error]
	close    sync.Once
}

// newForwardConn creates the request's error and data streams, as
// client-go's port forwarder does for each local connection.
func newForwardConn(sess httpstream.Connection, port int, what string) (*forwardConn, error) {
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := sess.CreateStream(h)
	if err != nil {
		return nil, err
	}
	_ = errStream.Close() // nothing is written to it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := sess.CreateStream(h)
	if err != nil {
		return nil, err
	}
	mine, theirs := net.Pipe()
	c := &forwardConn{Conn: mine, sess: sess}
	errDone := make(chan struct{})
	go func() {
		msg, _ := io.ReadAll(errStream)
		if len(msg) > 0 {
			err := fmt.Errorf("nothing accepts connections on %s: %s", what, msg)
			c.refused.Store(&err)
		}
		close(errDone)
	}()
	go func() {
		_, _ = io.Copy(theirs, data)
		// The kubelet closes the error stream when the forward ends: its
		// message, if any, is in before the reader sees the end.
		<-errDone
		theirs.Close()
	}()
	go func() {
		_, _ = io.Copy(data, theirs)
		_ = data.Close() // the far end reads EOF
	}()
	return c, nil
}

func (c *forwardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if errors.Is(err, io.EOF) {
		if r := c.refused.Load(); r != nil {
			return n, *r
		}
	}
	return n, err
}

// Close ends the connection and its session.
func (c *forwardConn) Close() error {
	c.close.Do(func() {
		c.Conn.Close()
		c.sess.Close()
	})
	return nil
}

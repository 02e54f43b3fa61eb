package kubernetes

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
)

// The protocols an exec or a port-forward was carried by.
const (
	// ProtocolWebSocket is v5.channel.k8s.io over WebSocket for an exec,
	// SPDY tunnelled through WebSocket for a port-forward.
	ProtocolWebSocket = "websocket"
	// ProtocolSPDY is SPDY/3.1, after the API server refused the upgrade
	// to WebSocket.
	ProtocolSPDY = "spdy"
)

// stream runs argv in the container through the exec subresource until it
// ends, over WebSocket (v5.channel.k8s.io: closing stdin is a message of
// its own, so the process reads EOF while its output still flows), or
// over SPDY when the API server refuses the upgrade (one older than 1.30,
// or a proxy between). It returns the protocol that carried it, and the
// stream's error: nil for exit code 0, exec.CodeExitError for another.
func (p *pod) stream(ctx context.Context, argv []string, o remotecommand.StreamOptions) (string, error) {
	u := p.api.core.RESTClient().Post().Namespace(p.ns).Resource("pods").Name(p.name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: p.container, Command: argv,
			Stdin: o.Stdin != nil, Stdout: o.Stdout != nil, Stderr: o.Stderr != nil,
		}, scheme.ParameterCodec).URL()
	ws, err := remotecommand.NewWebSocketExecutor(p.api.cfg, "GET", u.String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.api.cfg, "POST", u)
	if err != nil {
		return "", err
	}
	protocol := ProtocolWebSocket
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, p.fallback(&protocol))
	if err != nil {
		return "", err
	}
	err = ex.StreamWithContext(ctx, o)
	return protocol, err
}

// fallback is an exec's or a port-forward's test for trying SPDY after
// WebSocket: on a fallback it sets *protocol to ProtocolSPDY, and logs
// the driver's first.
func (p *pod) fallback(protocol *string) func(error) bool {
	return func(err error) bool {
		if !shouldFallback(err) {
			return false
		}
		*protocol = ProtocolSPDY
		p.d.spdyOnce.Do(func() {
			p.d.opts.Log.Info("kubernetes: the API server refused the WebSocket upgrade; execs and port-forwards fall back to SPDY", "server", p.api.cfg.Host, "err", err)
		})
		return true
	}
}

// shouldFallback is kubectl's test for trying SPDY after WebSocket, less
// an upgrade refused because the pod does not exist: SPDY would be
// refused the same.
func shouldFallback(err error) bool {
	var uf *httpstream.UpgradeFailureError
	if errors.As(err, &uf) && apierrors.IsNotFound(uf.Cause) {
		return false
	}
	return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
}

// exitCode reads the exit code from an exec stream's error: 0 for none,
// the code of a non-zero exit; ok is false for any other error (the
// stream broke, the pod is gone).
func exitCode(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ce exec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, true
	}
	return -1, false
}

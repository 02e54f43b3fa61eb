package rpc

import (
	"crypto/subtle"
	"io"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// RPCPath is where the WebSocket transport is served.
const RPCPath = "/v1/rpc"

// HTTPOptions configure the HTTP handler.
type HTTPOptions struct {
	// Token is the bearer token /v1/rpc requires. Empty means no token is
	// checked: only for a unix socket, whose file mode guards it.
	Token string
	// Transport labels the connections' metrics ("websocket", "unix").
	Transport string
	// Metrics serves /metrics (nil: not served).
	Metrics http.Handler
	// Ready reports whether the server takes new work; /readyz answers 503
	// while it returns false.
	Ready func() bool
}

// HTTPHandler serves /v1/rpc (WebSocket), /metrics, /healthz and /readyz.
// /metrics and the health endpoints need no token: they reveal no run.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(RPCPath, func(w http.ResponseWriter, r *http.Request) {
		if o.Token != "" && !authorized(r, o.Token) {
			s.Metrics.RPCMessagesRejected.WithLabelValues("unauthorized").Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
			http.Error(w, "unauthorized: send the token as \"Authorization: Bearer <token>\" (serve printed where it keeps the token; or set --token-file / BERTH_TOKEN)", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			s.log().Debug("rpc: websocket accept", "err", err)
			return
		}
		s.ServeConn(NewWebSocketFramer(c, s.maxMessageSize()), o.Transport)
	})
	if o.Metrics != nil {
		mux.Handle("/metrics", o.Metrics)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if o.Ready != nil && !o.Ready() {
			http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return mux
}

// authorized compares the bearer token in constant time. The scheme's
// name is case-insensitive (RFC 9110).
func authorized(r *http.Request, token string) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// ServeStdio serves one connection on a byte stream (the process's stdin
// and stdout) until the stream ends, and says why it did: an error
// wrapping ErrStreamLost when it was out of step beyond recovery.
func (s *Server) ServeStdio(r io.Reader, w io.Writer) error {
	return s.serveConn(NewStreamFramer(r, w, nil, s.maxMessageSize()), "stdio")
}

package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sync"

	"github.com/coder/websocket"
	"go.lsp.dev/jsonrpc2"

	"github.com/berth-dev/berth/orchestrator"
)

// AskFunc answers harness/ask: render the card, wait for the human. An
// error means no human can answer; its message reaches the model.
type AskFunc func(ctx context.Context, p AskParams) (*orchestrator.Answer, error)

// CallToolFunc answers harness/callTool: run the named tool of the
// harness's own registry for a cell's tool() call.
type CallToolFunc func(ctx context.Context, p HarnessCallToolParams) (*orchestrator.Result, error)

// Client is the harness's end of the protocol, for a harness written in
// Go. Set OnAsk and OnCallTool before starting runs that need them; a
// reverse request with no handler set is answered with an error that says
// so.
type Client struct {
	peer *peer
	wait func() error // after Close: reaps the child process, if any

	mu       sync.Mutex
	ask      AskFunc
	callTool CallToolFunc
}

// ClientOptions configure a client.
type ClientOptions struct {
	// MaxMessageSize bounds one inbound message (<= 0: DefaultMaxMessageSize).
	MaxMessageSize int64
}

func newClient(f Framer, o ClientOptions) *Client {
	c := &Client{}
	c.peer = newPeer(f, func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		res, err := c.handle(ctx, req)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			// The handler's own words reach Berth (and the model) as they are.
			err = &Error{Code: CodeInternalError, Message: err.Error()}
		}
		return res, err
	}, peerOptions{limit: o.MaxMessageSize})
	c.peer.start()
	return c
}

// Dial speaks the protocol over a byte stream with Content-Length framing
// (a child's stdio joined into one io.ReadWriteCloser, a TCP socket).
func Dial(rwc io.ReadWriteCloser, o ClientOptions) *Client {
	return newClient(NewStreamFramer(rwc, rwc, rwc, o.MaxMessageSize), o)
}

// DialCommand starts cmd (for example "orchestrator serve --stdio") and
// speaks the protocol over its stdin and stdout. Close closes its stdin and
// waits for it to exit. cmd.Stderr is left as the caller set it.
func DialCommand(cmd *exec.Cmd, o ClientOptions) (*Client, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := newClient(NewStreamFramer(stdout, stdin, stdin, o.MaxMessageSize), o)
	c.wait = cmd.Wait
	return c, nil
}

// DialWebSocket connects to url (ws://host:port/v1/rpc) with a bearer
// token.
func DialWebSocket(ctx context.Context, url, token string, o ClientOptions) (*Client, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: HTTP %d: %w", url, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	return newClient(NewWebSocketFramer(ws, o.MaxMessageSize), o), nil
}

// DialUnix connects to a Berth serving on the unix socket at path (no
// token: the socket's file mode guards it).
func DialUnix(ctx context.Context, path string, o ClientOptions) (*Client, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	ws, _, err := websocket.Dial(ctx, "ws://unix"+RPCPath, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("dial unix %s: %w", path, err)
	}
	return newClient(NewWebSocketFramer(ws, o.MaxMessageSize), o), nil
}

// OnAsk sets the harness/ask handler.
func (c *Client) OnAsk(f AskFunc) {
	c.mu.Lock()
	c.ask = f
	c.mu.Unlock()
}

// OnCallTool sets the harness/callTool handler.
func (c *Client) OnCallTool(f CallToolFunc) {
	c.mu.Lock()
	c.callTool = f
	c.mu.Unlock()
}

// Close ends the connection (and waits for the child started by
// DialCommand).
func (c *Client) Close() error {
	err := c.peer.Close()
	if c.wait != nil {
		if werr := c.wait(); werr != nil {
			var ee *exec.ExitError
			if !errors.As(werr, &ee) || err == nil {
				err = werr
			}
		}
	}
	return err
}

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.peer.Done() }

// Call sends any request; for methods the typed helpers do not cover.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.peer.Call(ctx, method, params, result)
}

// Initialize introduces the harness.
func (c *Client) Initialize(ctx context.Context, name, version string) (*InitializeResult, error) {
	var r InitializeResult
	err := c.peer.Call(ctx, "initialize", InitializeParams{Client: ClientInfo{Name: name, Version: version}}, &r)
	return &r, err
}

// StartRun starts a run.
func (c *Client) StartRun(ctx context.Context, p StartRunParams) (*StartRunResult, error) {
	var r StartRunResult
	if err := c.peer.Call(ctx, "run/start", p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// UpdateRun switches features of a run on or off.
func (c *Client) UpdateRun(ctx context.Context, runID string, features map[string]bool) error {
	return c.peer.Call(ctx, "run/update", UpdateRunParams{RunID: runID, Features: features}, nil)
}

// StopRun ends a run.
func (c *Client) StopRun(ctx context.Context, runID string) error {
	return c.peer.Call(ctx, "run/stop", RunParams{RunID: runID}, nil)
}

// ListTools lists the tools the surface sees for the run.
func (c *Client) ListTools(ctx context.Context, runID string, surface orchestrator.Surface) ([]ToolInfo, error) {
	var r ListToolsResult
	if err := c.peer.Call(ctx, "tools/list", ListToolsParams{RunID: runID, Surface: string(surface)}, &r); err != nil {
		return nil, err
	}
	return r.Tools, nil
}

// CallTool calls a tool. args is marshalled to JSON unless it already is
// a json.RawMessage. Cancelling ctx sends $/cancelRequest.
func (c *Client) CallTool(ctx context.Context, runID string, surface orchestrator.Surface, name string, args any) (*orchestrator.Result, error) {
	return c.CallToolWithID(ctx, "", runID, surface, name, args)
}

// CallToolWithID is CallTool with the harness's stable call id (callId),
// which a retry sends again: Berth never runs a call twice for one id
// (see docs/protocol.md#call-ids).
func (c *Client) CallToolWithID(ctx context.Context, callID, runID string, surface orchestrator.Surface, name string, args any) (*orchestrator.Result, error) {
	raw, ok := args.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	var r orchestrator.Result
	if err := c.peer.Call(ctx, "tools/call", CallToolParams{RunID: runID, Surface: string(surface), Name: name, Arguments: raw, CallID: callID}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// WillWrite tells Berth the harness is about to write paths.
func (c *Client) WillWrite(ctx context.Context, runID string, paths []string) error {
	return c.peer.Call(ctx, "files/willWrite", WriteParams{RunID: runID, Paths: paths}, nil)
}

// DidWrite tells Berth the harness wrote paths and returns the new
// diagnostics.
func (c *Client) DidWrite(ctx context.Context, runID string, paths []string) (*orchestrator.WriteReport, error) {
	var r orchestrator.WriteReport
	if err := c.peer.Call(ctx, "files/didWrite", WriteParams{RunID: runID, Paths: paths}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// handle answers Berth's reverse requests.
func (c *Client) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	c.mu.Lock()
	ask, callTool := c.ask, c.callTool
	c.mu.Unlock()
	switch req.Method() {
	case "harness/ask":
		if ask == nil {
			return nil, Errorf(CodeMethodNotFound, "this harness has no question handler: no human can answer")
		}
		var p AskParams
		if err := json.Unmarshal(req.Params(), &p); err != nil {
			return nil, Errorf(CodeInvalidParams, "invalid params for harness/ask: %v", err)
		}
		return ask(ctx, p)
	case "harness/callTool":
		if callTool == nil {
			return nil, Errorf(CodeMethodNotFound, "this harness does not take tool() calls")
		}
		var p HarnessCallToolParams
		if err := json.Unmarshal(req.Params(), &p); err != nil {
			return nil, Errorf(CodeInvalidParams, "invalid params for harness/callTool: %v", err)
		}
		return callTool(ctx, p)
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %s", req.Method())
}

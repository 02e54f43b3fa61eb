package debug

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/enclosure"
)

// startAdapter starts the adapter in the enclosure and connects to it:
// over its stdio, or (tcp) on the port it prints, through the enclosure's
// Dial.
func (s *session) startAdapter(ctx context.Context, enc enclosure.Enclosure, exe, dir string) error {
	proc, err := enc.Start(ctx, enclosure.Cmd{Path: exe, Args: s.adapter.Args, Dir: dir, Stderr: s.stderr})
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.adapter.ID, err)
	}
	s.proc = proc
	if s.adapter.Transport != "tcp" {
		s.connect(proc.Stdout(), proc.Stdin())
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
	defer cancel()
	port, err := listenPort(wctx, proc, s.stderr)
	if err != nil {
		return err
	}
	conn, err := enc.Dial(wctx, port)
	if err != nil {
		return fmt.Errorf("connecting to %s on port %d: %w", s.adapter.ID, port, err)
	}
	s.conn = conn
	s.connect(conn, conn)
	return nil
}

// listenAt finds the port in "DAP server listening at: 127.0.0.1:PORT".
var listenAt = regexp.MustCompile(`listening at:?\s*\S*:(\d+)`)

// maxListenLine bounds the line kept to look for the port in.
const maxListenLine = 4 << 10

// listenPort reads the adapter's stdout until it names its port, then
// keeps draining stdout into rest (so the adapter never blocks on a full
// pipe) until the process closes it.
func listenPort(ctx context.Context, proc enclosure.Process, rest io.Writer) (int, error) {
	found := make(chan int, 1)
	go func() {
		r := bufio.NewReader(proc.Stdout())
		sent := false
		for {
			// A line is kept only while it may name the port; a longer
			// one goes on to rest as it comes, so an adapter that never
			// ends a line costs no memory (issue 24 item 1).
			var line []byte
			long := false
			var err error
			for {
				var chunk []byte
				chunk, err = r.ReadSlice('\n')
				if !long && len(line)+len(chunk) > maxListenLine {
					_, _ = rest.Write(line)
					line, long = nil, true
				}
				if long {
					_, _ = rest.Write(chunk)
				} else {
					line = append(line, chunk...)
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
			}
			if !sent && !long {
				if m := listenAt.FindSubmatch(line); m != nil {
					if p, perr := strconv.Atoi(string(m[1])); perr == nil {
						found <- p
						sent = true
						continue
					}
				}
			}
			if !long {
				_, _ = rest.Write(line)
			}
			if err != nil {
				if !sent {
					close(found)
				}
				return
			}
		}
	}()
	select {
	case p, ok := <-found:
		if !ok {
			return 0, fmt.Errorf("the adapter exited before it listened")
		}
		return p, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("the adapter did not say which port it listens on: %w", ErrTimeout)
	}
}

// handshake runs initialize → launch/attach (its response not awaited) →
// initialized → setBreakpoints for every stored file in the adapter's
// languages (the others are kept in heldBack) and the exception
// breakpoints → configurationDone → the launch/attach response, in
// whichever order the adapter sends it. wait bounds the steps the program
// start may hold up (a build, for delve).
func (s *session) handshake(ctx context.Context, command string, args map[string]any, bps map[string][]int, wait time.Duration) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
	resp, err := s.c.call(rctx, &dap.InitializeRequest{
		Request: dap.Request{Command: "initialize"},
		Arguments: dap.InitializeRequestArguments{
			ClientID: "berth", ClientName: "Berth", AdapterID: s.adapter.AdapterID,
			LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path", SupportsVariableType: true,
		},
	})
	cancel()
	if err != nil {
		return err
	}
	if ir, ok := resp.(*dap.InitializeResponse); ok {
		s.caps = ir.Body
	}

	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	initialized := s.c.watch("initialized")
	var started <-chan dap.Message
	if command == "attach" {
		started, err = s.c.send(&dap.AttachRequest{Request: dap.Request{Command: "attach"}, Arguments: raw})
	} else {
		started, err = s.c.send(&dap.LaunchRequest{Request: dap.Request{Command: "launch"}, Arguments: raw})
	}
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var startResp dap.Message
	for done := false; !done; {
		select {
		case <-initialized.ch:
			done = true
		case m := <-started:
			if err := responseError(command, m); err != nil {
				s.c.unwatch(initialized)
				return err
			}
			startResp, started = m, nil
		case <-s.c.Done():
			return fmt.Errorf("%w: %v", ErrEnded, s.c.Err())
		case <-wctx.Done():
			s.c.unwatch(initialized)
			return fmt.Errorf("%s: no initialized event within %s: %w", command, wait, ErrTimeout)
		}
	}

	files := make([]string, 0, len(bps))
	for f := range bps {
		files = append(files, f)
	}
	sort.Strings(files)
	held := map[string][]int{}
	for _, f := range files {
		if len(bps[f]) == 0 {
			continue
		}
		if !s.adapter.takes(f) {
			// Another language's file: debugpy would call a C line
			// verified, lldb list a Python one as unverified, delve
			// fail to find a file its build never saw.
			held[f] = bps[f]
			continue
		}
		if err := s.setBreakpoints(ctx, f, bps[f]); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.heldBack = held
	s.mu.Unlock()
	if filters := s.exceptionFilters(); filters != nil {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
		_, err := s.c.call(rctx, &dap.SetExceptionBreakpointsRequest{
			Request: dap.Request{Command: "setExceptionBreakpoints"}, Arguments: dap.SetExceptionBreakpointsArguments{Filters: filters},
		})
		cancel()
		if err != nil {
			return err
		}
	}
	if s.caps.SupportsConfigurationDoneRequest {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
		_, err := s.c.call(rctx, &dap.ConfigurationDoneRequest{Request: dap.Request{Command: "configurationDone"}})
		cancel()
		if err != nil {
			return err
		}
	}
	if startResp == nil {
		if _, err := s.c.await(wctx, command, started); err != nil {
			return err
		}
	}
	return nil
}

// exceptionFilters are the configured filters the adapter offers; nil
// when the adapter offers none (the request is then not sent).
func (s *session) exceptionFilters() []string {
	if len(s.caps.ExceptionBreakpointFilters) == 0 {
		return nil
	}
	filters := []string{}
	for _, want := range s.adapter.ExceptionFilters {
		for _, f := range s.caps.ExceptionBreakpointFilters {
			if f.Filter == want {
				filters = append(filters, want)
			}
		}
	}
	return filters
}

// setBreakpoints replaces the breakpoints of one file (an absolute host
// path, symlinks resolved) and keeps the adapter's answer.
func (s *session) setBreakpoints(ctx context.Context, hostFile string, lines []int) error {
	file, err := s.mapPath(hostFile)
	if err != nil {
		return err
	}
	sbs := make([]dap.SourceBreakpoint, len(lines))
	for i, l := range lines {
		sbs[i] = dap.SourceBreakpoint{Line: l}
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
	defer cancel()
	req := &setBreakpointsRequest{Request: dap.Request{Command: "setBreakpoints"}}
	req.Arguments.Source = dap.Source{Path: file, Name: baseName(file)}
	req.Arguments.Breakpoints, req.Arguments.Lines = sbs, lines
	if lines == nil {
		req.Arguments.Lines = []int{}
	}
	resp, err := s.c.call(rctx, req)
	if err != nil {
		return err
	}
	sb, err := as[*dap.SetBreakpointsResponse]("setBreakpoints", resp)
	if err != nil {
		return err
	}
	got := sb.Body.Breakpoints
	out := make([]breakpoint, len(lines))
	for i, l := range lines {
		bp := dap.Breakpoint{Line: l, Message: "the adapter did not answer for this line"}
		if i < len(got) {
			bp = got[i]
			if bp.Line == 0 {
				bp.Line = l
			}
		}
		bp.Source = &dap.Source{Path: file}
		out[i] = breakpoint{requested: l, Breakpoint: bp}
	}
	s.mu.Lock()
	s.bps[file] = out
	s.mu.Unlock()
	return nil
}

// setBreakpointsRequest is go-dap's request without omitempty on the
// lists: clearing a file sends "breakpoints": [], which debugpy needs
// (without the field its server disconnects).
type setBreakpointsRequest struct {
	dap.Request
	Arguments struct {
		Source      dap.Source             `json:"source"`
		Breakpoints []dap.SourceBreakpoint `json:"breakpoints"`
		Lines       []int                  `json:"lines"`
	} `json:"arguments"`
}

// mapPath is hostPath as the adapter sees it.
func (s *session) mapPath(hostPath string) (string, error) {
	if s.paths.toAdapter == nil {
		return hostPath, nil
	}
	return s.paths.toAdapter(hostPath)
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

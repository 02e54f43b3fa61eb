package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/orchestrator/debug"
)

// directLaunch sends the exchange Berth sends, straight to the adapter:
// start it, initialize, launch, initialized, setBreakpoints, exception
// breakpoints (debugpy), configurationDone, the launch response, the
// stopped event, and the top frame. It times from starting the adapter to
// having that frame.
func directLaunch(a debug.Adapter, python, dir string, pr project) (time.Duration, error) {
	start := time.Now()
	exe := python
	if a.Interpreter == "" {
		var err error
		if exe, err = exec.LookPath(a.Executables[0]); err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(exe, a.Args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var r io.Reader = stdout
	var w io.Writer = stdin
	if a.Transport == "tcp" {
		port, err := port(stdout)
		if err != nil {
			return 0, err
		}
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		r, w = conn, conn
	}
	c := &minimal{w: w, msgs: make(chan dap.Message, 64), done: make(chan struct{})}
	defer close(c.done) // before the kill above: the reader stops sending
	go c.read(r)

	c.send(&dap.InitializeRequest{Request: dap.Request{Command: "initialize"}, Arguments: dap.InitializeRequestArguments{
		ClientID: "direct", AdapterID: a.AdapterID, LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path"}})
	init, err := c.expect("initialize", 15*time.Second)
	if err != nil {
		return 0, err
	}
	args := map[string]any{"request": "launch", "program": filepath.Join(dir, pr.program), "args": []string{}, "cwd": dir}
	for k, v := range a.Launch {
		args[k] = v
	}
	if a.Interpreter != "" {
		args["python"] = python
	}
	if a.Builds {
		out := filepath.Join(os.TempDir(), fmt.Sprintf("berth-bench-%d", time.Now().UnixNano()))
		args["output"] = out
		defer os.Remove(out)
	}
	raw, _ := json.Marshal(args)
	c.send(&dap.LaunchRequest{Request: dap.Request{Command: "launch"}, Arguments: raw})
	if _, err := c.expect("initialized", 3*time.Minute); err != nil {
		return 0, err
	}
	file := filepath.Join(dir, pr.file)
	c.send(&dap.SetBreakpointsRequest{Request: dap.Request{Command: "setBreakpoints"}, Arguments: dap.SetBreakpointsArguments{
		Source: dap.Source{Path: file, Name: filepath.Base(file)}, Breakpoints: []dap.SourceBreakpoint{{Line: pr.line}}}})
	if _, err := c.expect("setBreakpoints", 15*time.Second); err != nil {
		return 0, err
	}
	if caps := init.(*dap.InitializeResponse).Body; len(caps.ExceptionBreakpointFilters) > 0 {
		c.send(&dap.SetExceptionBreakpointsRequest{Request: dap.Request{Command: "setExceptionBreakpoints"},
			Arguments: dap.SetExceptionBreakpointsArguments{Filters: a.ExceptionFilters}})
		if _, err := c.expect("setExceptionBreakpoints", 15*time.Second); err != nil {
			return 0, err
		}
	}
	c.send(&dap.ConfigurationDoneRequest{Request: dap.Request{Command: "configurationDone"}})
	if _, err := c.expect("configurationDone", 15*time.Second); err != nil {
		return 0, err
	}
	stopped, err := c.expect("stopped", 30*time.Second) // the launch response is taken on the way
	if err != nil {
		return 0, err
	}
	c.send(&dap.StackTraceRequest{Request: dap.Request{Command: "stackTrace"}, Arguments: dap.StackTraceArguments{
		ThreadId: stopped.(*dap.StoppedEvent).Body.ThreadId, Levels: 1}})
	if _, err := c.expect("stackTrace", 15*time.Second); err != nil {
		return 0, err
	}
	took := time.Since(start)
	c.send(&dap.DisconnectRequest{Request: dap.Request{Command: "disconnect"}, Arguments: &dap.DisconnectArguments{TerminateDebuggee: true}})
	_, _ = c.expect("disconnect", 5*time.Second)
	return took, nil
}

var listenAt = regexp.MustCompile(`listening at:?\s*\S*:(\d+)`)

// port reads "DAP server listening at: 127.0.0.1:PORT", then drains.
func port(r io.Reader) (int, error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if m := listenAt.FindStringSubmatch(line); m != nil {
			go func() { _, _ = io.Copy(io.Discard, br) }()
			return strconv.Atoi(m[1])
		}
		if err != nil {
			return 0, fmt.Errorf("the adapter did not say its port: %w", err)
		}
	}
}

// minimal is the least DAP client that can do the exchange: a reader
// goroutine feeding one channel, and expect, which skips what it does not
// want.
type minimal struct {
	w    io.Writer
	seq  int
	msgs chan dap.Message
	done chan struct{} // closed when the exchange is over
}

func (c *minimal) read(r io.Reader) {
	br := bufio.NewReader(r)
	defer close(c.msgs)
	for {
		data, err := dap.ReadBaseMessage(br)
		if err != nil {
			return
		}
		if m, err := dap.DecodeProtocolMessage(data); err == nil {
			// Once the exchange is over nobody receives: drop the rest
			// (late output events) rather than block until the kill.
			select {
			case c.msgs <- m:
			case <-c.done:
				return
			}
		}
	}
}

func (c *minimal) send(m dap.RequestMessage) {
	c.seq++
	m.GetRequest().Seq, m.GetRequest().Type = c.seq, "request"
	_ = dap.WriteProtocolMessage(c.w, m)
}

// expect waits for a response to command or an event named so.
func (c *minimal) expect(name string, d time.Duration) (dap.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				return nil, fmt.Errorf("the adapter closed while waiting for %s", name)
			}
			switch x := m.(type) {
			case dap.ResponseMessage:
				if x.GetResponse().Command == name {
					if !x.GetResponse().Success {
						return nil, fmt.Errorf("%s failed: %s", name, x.GetResponse().Message)
					}
					return m, nil
				}
			case dap.EventMessage:
				if x.GetEvent().Event == name {
					return m, nil
				}
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("no %s within %s", name, d)
		}
	}
}

// Command fakelsp is a language server that misbehaves on purpose, beside
// the real ones, to show what they cannot be made to do: crash mid-request,
// fail to start, answer ContentModified, stay silent, publish stale
// diagnostics, take its time loading the workspace, report on another file
// late, rename in the one file it was asked about only, never read a file,
// say it is in error (window/showMessage).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	mode  = flag.String("mode", "", "crash-on-hover, hang-on-hover, crash-on-rename, crash-on-start, content-modified, silent, stale, loading, late, partial-rename, hostile-names, endless-header-on-hover, huge-on-hover, endless-header-on-start, complain, command-fails (workspace/executeCommand answers an error)")
	flood = flag.Int64("flood", 256<<20, "endless-header-on-*, huge-on-hover: how many bytes to write before it stops writing (and hangs)")
	once  = flag.String("once", "", "crash-on-*: crash only when this file does not exist yet (it is created); hang-on-hover: counts the hovers")
	mute  = flag.String("mute", "", "publish no diagnostics for the file of this name: it is never read")
	load  = flag.Duration("load", time.Second, "loading: how long the workspace load reported through $/progress lasts; late: how late b.fake is reported on")
)

type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

var (
	outMu sync.Mutex // the load's end is sent from a timer
	out   = bufio.NewWriter(os.Stdout)
)

func send(v any) {
	b, _ := json.Marshal(v)
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(out, "Content-Length: %d\r\n\r\n%s", len(b), b)
	out.Flush()
}

func progress(kind string) {
	send(map[string]any{"jsonrpc": "2.0", "method": "$/progress", "params": map[string]any{
		"token": "load", "value": map[string]any{"kind": kind, "title": "Loading the workspace"}}})
}

func reply(id json.RawMessage, result any) {
	send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// floodThenHang writes head, then -flood bytes of fill, then waits to be
// killed: the client must not have read it all to see the problem.
func floodThenHang(head string, fill byte) {
	outMu.Lock()
	out.WriteString(head)
	chunk := []byte(strings.Repeat(string(fill), 64<<10))
	for n := int64(0); n < *flood; n += int64(len(chunk)) {
		if _, err := out.Write(chunk); err != nil {
			os.Exit(0)
		}
	}
	out.Flush()
	for {
		time.Sleep(time.Hour)
	}
}

func crash(why string) {
	fmt.Fprintln(os.Stderr, "fakelsp: "+why)
	os.Exit(3)
}

func main() {
	flag.Parse()
	if *mode == "crash-on-start" {
		crash("cannot start: crashing on purpose")
	}
	in := bufio.NewReader(os.Stdin)
	modified := 0
	var loaded atomic.Bool
	var rootURI string
	texts := map[string]string{} // open documents by URI
	for {
		n := 0
		for {
			line, err := in.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(in, body); err != nil {
			return
		}
		var m message
		if json.Unmarshal(body, &m) != nil {
			continue
		}
		switch m.Method {
		case "initialize":
			if *mode == "endless-header-on-start" {
				floodThenHang("Content-Length: ", '9')
			}
			var p struct {
				RootURI string `json:"rootUri"`
			}
			json.Unmarshal(m.Params, &p)
			rootURI = p.RootURI
			caps := map[string]any{"hoverProvider": true, "textDocumentSync": 1}
			switch *mode {
			case "crash-on-rename", "partial-rename":
				caps["renameProvider"] = true
			case "loading":
				caps["workspaceSymbolProvider"] = true
			case "hostile-names":
				caps["workspaceSymbolProvider"] = true
				caps["referencesProvider"] = true
			}
			reply(m.ID, map[string]any{"capabilities": caps})
		case "initialized":
			if *mode == "complain" {
				send(map[string]any{"jsonrpc": "2.0", "method": "window/showMessage", "params": map[string]any{
					"type": 1, "message": "fakelsp: cannot load the workspace: complaining on purpose"}})
			}
			if *mode == "loading" {
				progress("begin")
				time.AfterFunc(*load, func() {
					loaded.Store(true)
					progress("end")
				})
			}
		case "workspace/symbol":
			if *mode == "hostile-names" {
				reply(m.ID, []any{map[string]any{"name": "evil\n/etc/passwd:1:1: fake", "kind": 12, "location": hostileLocation(rootURI)}})
				continue
			}
			reply(m.ID, []any{map[string]any{"name": fmt.Sprintf("loaded=%v", loaded.Load()), "kind": 12, "location": map[string]any{
				"uri": rootURI + "/a.fake", "range": map[string]any{"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 0, "character": 5}}}}})
		case "textDocument/rename":
			if *mode == "crash-on-rename" {
				crash("crashing mid-rename on purpose")
			}
			if *mode == "partial-rename" {
				reply(m.ID, partialRename(m.Params, texts))
				continue
			}
			reply(m.ID, nil)
		case "textDocument/references":
			// A path with a newline in it, percent-encoded as a URI
			// has it: shown raw, it prints a line of its own.
			reply(m.ID, []any{hostileLocation(rootURI)})
		case "shutdown":
			reply(m.ID, nil)
		case "exit":
			return
		case "textDocument/hover":
			switch *mode {
			case "crash-on-hover":
				if _, err := os.Stat(*once); err != nil {
					os.WriteFile(*once, nil, 0o644)
					crash("crashing mid-request on purpose")
				}
			case "hang-on-hover":
				// The first two hovers (counted in the -once file, by any
				// server) are never answered.
				old, _ := os.ReadFile(*once)
				os.WriteFile(*once, append(old, '.'), 0o644)
				if len(old) < 2 {
					continue
				}
			case "endless-header-on-hover":
				// A header line that never ends.
				floodThenHang("Content-Length: ", '9')
			case "huge-on-hover":
				// A message that declares 1 GiB.
				floodThenHang("Content-Length: 1073741824\r\n\r\n", ' ')
			case "content-modified":
				if modified < 2 {
					modified++
					send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32801, "message": "content modified"}})
					continue
				}
			}
			if *mode == "hostile-names" {
				reply(m.ID, map[string]any{"contents": "hover\x1b[2J\rwiped"})
				continue
			}
			reply(m.ID, map[string]any{"contents": fmt.Sprintf("fake hover from pid %d after %d ContentModified", os.Getpid(), modified)})
		case "textDocument/didOpen", "textDocument/didChange":
			var p struct {
				TextDocument struct {
					URI     string `json:"uri"`
					Version int    `json:"version"`
					Text    string `json:"text"`
				} `json:"textDocument"`
				ContentChanges []struct {
					Text string `json:"text"`
				} `json:"contentChanges"`
			}
			json.Unmarshal(m.Params, &p)
			text := p.TextDocument.Text
			if len(p.ContentChanges) > 0 {
				text = p.ContentChanges[0].Text
			}
			texts[p.TextDocument.URI] = text
			if *mute != "" && strings.HasSuffix(p.TextDocument.URI, "/"+*mute) {
				continue
			}
			switch *mode {
			case "late":
				// The file at once, b.fake (a caller) only well after:
				// broken while the text says "break".
				send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]any{
					"uri": p.TextDocument.URI, "version": p.TextDocument.Version, "diagnostics": []any{}}})
				var diags []any
				if strings.Contains(text, "break") {
					diags = append(diags, map[string]any{"range": map[string]any{"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 0, "character": 1}}, "message": "broken by a.fake"})
				}
				time.AfterFunc(*load, func() {
					send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]any{
						"uri": rootURI + "/b.fake", "diagnostics": append([]any{}, diags...)}})
				})
			case "silent":
			case "hostile-names":
				send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]any{
					"uri": p.TextDocument.URI, "version": p.TextDocument.Version,
					"diagnostics": []any{map[string]any{"range": map[string]any{"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 0, "character": 1}},
						"message": "bad\n/etc/passwd:1:1: error: forged\x1b[2J", "code": "c\nd"}}}})
			case "stale":
				send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]any{
					"uri": p.TextDocument.URI, "version": p.TextDocument.Version - 1,
					"diagnostics": []any{map[string]any{"range": map[string]any{"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 0, "character": 1}}, "message": "stale"}}}})
			default: // an error on every line that says "bad"
				diags := []any{}
				for i, line := range strings.Split(text, "\n") {
					if strings.Contains(line, "bad") {
						diags = append(diags, map[string]any{"range": map[string]any{"start": map[string]any{"line": i, "character": 0}, "end": map[string]any{"line": i, "character": 3}}, "message": "bad here"})
					}
				}
				send(map[string]any{"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": map[string]any{
					"uri": p.TextDocument.URI, "version": p.TextDocument.Version, "diagnostics": diags}})
			}
		case "workspace/executeCommand":
			if *mode == "command-fails" {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "unknown command"}})
				continue
			}
			reply(m.ID, nil)
		default:
			if len(m.ID) > 0 {
				reply(m.ID, nil)
			}
		}
	}
}

// partialRename renames the word at the position in that document alone,
// as a server that has not loaded the project would: uses elsewhere stay.
func partialRename(params json.RawMessage, texts map[string]string) any {
	var p struct {
		TextDocument struct {
			URI string `json:"uri"`
		} `json:"textDocument"`
		Position struct {
			Line      int `json:"line"`
			Character int `json:"character"`
		} `json:"position"`
		NewName string `json:"newName"`
	}
	json.Unmarshal(params, &p)
	lines := strings.Split(texts[p.TextDocument.URI], "\n")
	if p.Position.Line >= len(lines) {
		return nil
	}
	line, end := lines[p.Position.Line], p.Position.Character
	for end < len(line) && line[end] != ' ' {
		end++
	}
	rng := map[string]any{"start": map[string]any{"line": p.Position.Line, "character": p.Position.Character},
		"end": map[string]any{"line": p.Position.Line, "character": end}}
	return map[string]any{"changes": map[string]any{p.TextDocument.URI: []any{map[string]any{"range": rng, "newText": p.NewName}}}}
}

// hostileLocation is a place in a file whose name holds a newline
// ("a.fake\n/etc/passwd"), as a server names it in a URI.
func hostileLocation(rootURI string) map[string]any {
	return map[string]any{"uri": rootURI + "/a.fake%0A/etc/passwd", "range": map[string]any{
		"start": map[string]any{"line": 0, "character": 0}, "end": map[string]any{"line": 0, "character": 1}}}
}

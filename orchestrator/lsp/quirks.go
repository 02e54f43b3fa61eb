package lsp

import (
	"context"
	"encoding/json"
	"fmt"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// quirks is how one server departs from the protocol, chosen from its
// entry (ready, pull_diagnostics) when it starts: each is nil for a
// server that needs none, which then gets the protocol's way.
type quirks struct {
	// probeLoad asks the server whether it has loaded the project of a
	// file, instead of waiting for its ready signal (tsserver, which
	// loads a project only for an open file and says nothing when done).
	probeLoad func(ctx context.Context, s *server, abs string) bool
	// pull asks for a file's diagnostics the server's own way, before
	// textDocument/diagnostic and the publish (tsserver publishes only
	// when a file's diagnostics change).
	pull func(ctx context.Context, s *server, abs string) ([]protocol.Diagnostic, error)
	// diagnoseAll has the server diagnose, now, everything the given
	// files' changes affect, and returns once it has published it all
	// (gopls's command): a write's check asks once for all its files,
	// and need not listen for a debounce after it for the importers a
	// write broke. nil for a server that offers no such thing.
	diagnoseAll func(ctx context.Context, s *server, files []string) error
	// index stands in for the index of a server that knows only the files
	// it has open (ready "open-files": clangd without its background
	// index): before a rename it shows the server every file that
	// mentions the name (showMentions), and a workspace-wide answer says
	// it may be incomplete.
	index func(ctx context.Context, s *server, name string) error
}

// quirksFor picks the quirks of an entry with the ready signal r.
func quirksFor(cfg ServerConfig, r readiness) quirks {
	var q quirks
	if r.kind == readyTsserver {
		q.probeLoad = tsserverLoaded
	}
	switch cfg.PullDiagnostics {
	case pullTsserver:
		q.pull = tsserverDiagnostics
	case pullGopls:
		q.diagnoseAll = goplsDiagnose
	}
	if r.kind == readyOpenFiles {
		q.index = showMentions
	}
	return q
}

// tsserverLoaded asks tsserver about the project of abs, the file of
// the query (else the file synced last, else a file of the root, opened
// first: tsserver loads a project only for an open file). tsserver
// answers in order, so its answer comes after the load.
//
// It is asked only until it has answered once: a query about an open
// file is then answered after tsserver has loaded (or reloaded) the
// file's project, if it must, in order, so the probe would only add its
// round trip (0.5 ms to every references warm, 1-1.5 ms to a run's
// first, 2.5-6.8 ms to a first about a newly opened file, on
// codemirror-promql).
func tsserverLoaded(ctx context.Context, s *server, abs string) bool {
	if abs == "" {
		abs = s.docs.lastSynced()
	}
	if abs != "" && s.load.isLoaded() && s.docs.has(abs) {
		return true
	}
	if abs == "" {
		if abs = firstFile(s.paths.root, s.cfg); abs == "" {
			s.load.markLoaded() // no file of its languages: nothing to load
			return true
		}
		if _, err := s.sync(ctx, abs, false); err != nil {
			return false
		}
	}
	arg, err := json.Marshal(map[string]any{"file": s.paths.mapPath(abs), "needFileNameList": false})
	if err != nil {
		return false
	}
	name, _ := json.Marshal("projectInfo")
	err = s.proc.call(ctx, protocol.MethodWorkspaceExecuteCommand, func(ctx context.Context) error {
		_, err := s.proc.api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "typescript.tsserverRequest", Arguments: []protocol.LSPAny{name, arg}})
		return err
	})
	if err != nil {
		return false
	}
	s.load.markLoaded()
	return true
}

// pullTsserver names the pull through typescript-language-server's
// typescript.tsserverRequest command: it publishes only when a file's
// diagnostics change, so after a write that keeps a file clean it stays
// silent, and silence must not be taken as clean.
const pullTsserver = "tsserver"

// tsserverDiagnostics asks tsserver for a file's syntactic and semantic
// diagnostics, answered in order after the file's last change.
func tsserverDiagnostics(ctx context.Context, s *server, abs string) ([]protocol.Diagnostic, error) {
	var out []protocol.Diagnostic
	for _, cmd := range []string{"syntacticDiagnosticsSync", "semanticDiagnosticsSync"} {
		arg, err := json.Marshal(map[string]any{"file": s.paths.mapPath(abs)})
		if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(cmd)
		var res protocol.LSPAny
		err = s.proc.call(ctx, protocol.MethodWorkspaceExecuteCommand, func(ctx context.Context) error {
			var err error
			res, err = s.proc.api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "typescript.tsserverRequest", Arguments: []protocol.LSPAny{name, arg}})
			return err
		})
		if err != nil {
			return nil, err
		}
		var body struct {
			Body []struct {
				Start, End struct{ Line, Offset uint32 }
				Text       string
				Code       int32
				Category   string
			} `json:"body"`
		}
		if err := json.Unmarshal(res, &body); err != nil {
			return nil, fmt.Errorf("tsserver's %s answer: %w", cmd, err)
		}
		for _, d := range body.Body {
			sev := protocol.DiagnosticSeverityError
			switch d.Category {
			case "warning":
				sev = protocol.DiagnosticSeverityWarning
			case "suggestion":
				sev = protocol.DiagnosticSeverityHint
			case "message":
				sev = protocol.DiagnosticSeverityInformation
			}
			out = append(out, protocol.Diagnostic{
				Range: protocol.Range{Start: protocol.Position{Line: d.Start.Line - 1, Character: d.Start.Offset - 1},
					End: protocol.Position{Line: d.End.Line - 1, Character: d.End.Offset - 1}},
				Severity: sev, Code: protocol.Integer(d.Code), Source: protocol.NewOptional("typescript"),
				Message: protocol.String(d.Text),
			})
		}
	}
	return out, nil
}

// pullGopls names the pull through gopls's gopls.diagnose_files
// command. gopls diagnoses a change in two passes: at once the changed
// package's type errors, then, after its diagnosticsDelay (1 s), all of
// it (analyses, and the importers the change broke). Waiting for the
// second pass would add the delay to every write; a delay of 0 instead
// makes gopls run every analysis at each document's first open, on the
// cores the query that opened it needs (a first references took 17-23
// ms on cobra, against 11-13 ms with the delay). The command runs the
// second pass now, and answers once it has published.
const pullGopls = "gopls"

// goplsDiagnose has gopls diagnose, now, the workspace of each of files
// (its views that hold them), as its second pass would after the delay.
// gopls publishes what it finds before it answers the command, and
// Berth records a publish before it reads the next message (connect),
// so when this returns every publish of the pass is recorded: written
// files and the importers a write broke. gopls republishes a file only
// when its diagnostics changed, so a file's newest publish stands. Only
// the views that hold the files are diagnosed: an importer in another
// view (a module outside go.work) is published after gopls's delay, and
// heard by the next check (check reads what was published since).
func goplsDiagnose(ctx context.Context, s *server, files []string) error {
	uris := make([]uri.URI, len(files))
	for i, abs := range files {
		uris[i] = s.paths.toURI(abs)
	}
	args, err := json.Marshal(map[string]any{"Files": uris})
	if err != nil {
		return err
	}
	return s.proc.call(ctx, protocol.MethodWorkspaceExecuteCommand, func(ctx context.Context) error {
		_, err := s.proc.api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "gopls.diagnose_files", Arguments: []protocol.LSPAny{args}})
		return err
	})
}

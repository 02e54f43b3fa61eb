// Command warm fills gopls's file cache with the standard library, at an
// image's build, as Berth's own client fills it (issue 28 item 3):
// scripts/images builds it into images/lsp's build context, and that
// Dockerfile runs it in a stage of its own, whose caches the image
// copies.
//
// It writes a module whose one file imports every package of the
// standard library a program may import (go list std, less internal,
// vendor and main packages and those the platform builds no file of),
// starts gopls on it with Berth's client capabilities and the catalog's
// initialization options and settings, opens the file and waits for its
// diagnostics: by then gopls has loaded the module, type-checked every
// package it imports and analysed each for the analyzers' facts, and
// stored each result in its cache. It then waits until the cache stops
// growing, and ends gopls.
//
// The client must be Berth's: what a client declares is part of gopls's
// cache keys (whether it takes related information, for one), so entries
// another client fills (gopls check's, say) are never found by Berth's.
// The keys of a standard package depend on gopls's build, the Go
// toolchain, GOROOT, GOOS and GOARCH, cgo (on, with the image's gcc) and
// GOCACHE's path (cgo's output lives there), never on the module that
// imports it, so one module serves every project.
//
// Usage:
//
//	warm [-timeout 20m] [-gopls gopls] [MODULE_DIR]
//	warm -fingerprint
//
// With MODULE_DIR it fills the cache for that module instead: its
// packages (it opens the first file of each) and their dependencies. A
// platform team can so bake its own projects into an image of its own.
// -fingerprint prints what the client tells gopls (its capabilities and
// the catalog's options and settings), on which the cache's keys depend:
// scripts/images hashes it, with this file, to tell when the images need
// warming again (the binary itself changes with any of Berth's code).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/orchestrator/lsp"
)

func main() {
	timeout := flag.Duration("timeout", 20*time.Minute, "give up after this long")
	gopls := flag.String("gopls", "gopls", "the gopls to run (the image's)")
	fingerprint := flag.Bool("fingerprint", false, "print what the client tells gopls (capabilities, initialization options, settings), which gopls's cache keys depend on, and exit: scripts/images hashes it to tell when the images need warming again")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: warm [-timeout 20m] [-gopls gopls] [MODULE_DIR]\n\nFills gopls's cache with the standard library, or with the module at MODULE_DIR (its packages and their dependencies), as Berth's client fills it.")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *fingerprint {
		if err := printFingerprint(); err != nil {
			fmt.Fprintln(os.Stderr, "warm:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	what, err := warm(ctx, *gopls, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "warm:", err)
		os.Exit(1)
	}
	dir, _ := cacheDir()
	files, size := usage(dir)
	fmt.Fprintf(os.Stderr, "warm: %s; gopls's cache (%s) holds %d files, %d MB; %s\n",
		what, dir, files, size>>20, time.Since(start).Round(time.Second))
}

// printFingerprint prints, as JSON, what the client sends gopls.
func printFingerprint() error {
	cfg, err := goplsEntry()
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"capabilities": lsp.ClientCapabilities(),
		"initializationOptions": cfg.InitializationOptions, "settings": cfg.Settings})
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// warm runs gopls on the module at dir (the standard library's module
// when dir is "") until it has diagnosed every package's first file, and
// says what it warmed.
func warm(ctx context.Context, gopls, dir string) (string, error) {
	var files map[string]string // path: text, the files to open
	var what string
	if dir == "" {
		d, err := os.MkdirTemp("", "berth-warm-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(d)
		file, text, n, err := stdModule(ctx, d)
		if err != nil {
			return "", err
		}
		dir, files, what = d, map[string]string{file: text}, fmt.Sprintf("%d packages of the standard library", n)
	} else {
		var err error
		if dir, err = filepath.Abs(dir); err != nil {
			return "", err
		}
		if files, err = firstFiles(ctx, dir); err != nil {
			return "", err
		}
		what = fmt.Sprintf("%d packages of %s and their dependencies", len(files), dir)
	}
	cfg, err := goplsEntry()
	if err != nil {
		return "", err
	}
	s, err := startServer(ctx, gopls, dir, cfg)
	if err != nil {
		return "", err
	}
	defer s.close()
	if err := s.diagnose(ctx, files); err != nil {
		return "", err
	}
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	// gopls stores some results from goroutines of their own: wait until
	// the cache has stopped growing for a while.
	last, since := -1, time.Now()
	for time.Since(since) < 3*time.Second {
		if n, _ := usage(cache); n != last {
			last, since = n, time.Now()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("gopls's cache was still growing at the timeout: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	return what, nil
}

// stdModule writes, in dir, a module whose one file imports the
// standard library, and returns the file, its text and how many packages
// it imports.
func stdModule(ctx context.Context, dir string) (string, string, int, error) {
	pkgs, err := stdPackages(ctx)
	if err != nil {
		return "", "", 0, err
	}
	lang, err := goLang(ctx)
	if err != nil {
		return "", "", 0, err
	}
	var src strings.Builder
	src.WriteString("// Package warm imports the standard library, for gopls to load.\npackage warm\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n")
	file := filepath.Join(dir, "warm.go")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), fmt.Appendf(nil, "module berth.invalid/warm\n\ngo %s\n", lang), 0o644); err != nil {
		return "", "", 0, err
	}
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		return "", "", 0, err
	}
	return file, src.String(), len(pkgs), nil
}

// firstFiles reads the first Go file of each package of the module at
// dir.
func firstFiles(ctx context.Context, dir string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-f", "{{if .GoFiles}}{{.Dir}}/{{index .GoFiles 0}}{{end}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./... in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	files := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		files[f] = string(b)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no Go package: give a module's directory", dir)
	}
	return files, nil
}

// stdPackages lists the importable packages of the standard library.
func stdPackages(ctx context.Context) ([]string, error) {
	out, err := command(ctx, "go", "list", "-e", "-f", "{{if and (not .Error) .GoFiles (ne .Name \"main\")}}{{.ImportPath}}{{end}}", "std")
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, p := range strings.Fields(out) {
		if p == "internal" || strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal") ||
			p == "vendor" || strings.HasPrefix(p, "vendor/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 100 {
		return nil, fmt.Errorf("go list std gave %d importable packages, fewer than any Go release has: is this GOROOT whole?", len(pkgs))
	}
	return pkgs, nil
}

// goLang is the toolchain's language version (1.26 of go1.26.8), for
// the module's go directive.
func goLang(ctx context.Context) (string, error) {
	v, err := command(ctx, "go", "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(v), "go"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("go env GOVERSION printed %q: not a release (goX.Y.Z); build the image with a released toolchain", v)
	}
	return parts[0] + "." + parts[1], nil
}

func command(ctx context.Context, name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// goplsEntry is the catalog's gopls entry: its initialization options and
// settings are what Berth sends.
func goplsEntry() (lsp.ServerConfig, error) {
	for _, s := range lsp.DefaultServers() {
		if s.Name == "gopls" {
			return s, nil
		}
	}
	return lsp.ServerConfig{}, errors.New("lsp.DefaultServers has no gopls entry: warm follows the catalog's; give it one")
}

// cacheDir is gopls's cache as gopls finds it: $GOPLSCACHE/gopls, else
// the user's cache directory's.
func cacheDir() (string, error) {
	d := os.Getenv("GOPLSCACHE")
	if d == "" {
		var err error
		if d, err = os.UserCacheDir(); err != nil {
			return "", fmt.Errorf("gopls's cache: set GOPLSCACHE (%w)", err)
		}
	}
	return filepath.Join(d, "gopls"), nil
}

// usage counts the regular files under dir and their bytes.
func usage(dir string) (files int, size int64) {
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				files++
				size += fi.Size()
			}
		}
		return nil
	})
	return files, size
}

// server is gopls on the module, as Berth's client drives it.
type server struct {
	cmd    *exec.Cmd
	conn   jsonrpc2.Conn
	api    protocol.Server
	stderr bytes.Buffer
	cfg    lsp.ServerConfig

	mu        sync.Mutex
	published map[uri.URI]chan struct{}
}

type pipes struct {
	io.Reader
	io.WriteCloser
}

func startServer(ctx context.Context, gopls, dir string, cfg lsp.ServerConfig) (*server, error) {
	s := &server{cfg: cfg, published: map[uri.URI]chan struct{}{}}
	s.cmd = exec.Command(gopls, cfg.Command[1:]...)
	s.cmd.Dir = dir
	s.cmd.Stderr = &s.stderr
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", gopls, err)
	}
	_, s.conn, s.api = protocol.NewClient(context.Background(), &client{s: s}, jsonrpc2.NewHeaderStream(pipes{stdout, stdin}))
	params := map[string]any{
		"processId": os.Getpid(), "rootUri": uri.File(dir), "rootPath": dir, "clientInfo": map[string]any{"name": "berth-warm"},
		"workspaceFolders":      []protocol.WorkspaceFolder{{URI: uri.File(dir), Name: filepath.Base(dir)}},
		"capabilities":          lsp.ClientCapabilities(),
		"initializationOptions": cfg.InitializationOptions,
	}
	var raw json.RawMessage
	if _, err := s.conn.Call(ctx, protocol.MethodInitialize, params, &raw); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w%s", err, s.said())
	}
	if err := s.api.Initialized(ctx, &protocol.InitializedParams{}); err != nil {
		s.close()
		return nil, fmt.Errorf("initialized: %w%s", err, s.said())
	}
	if cfg.Settings != nil {
		b, err := json.Marshal(cfg.Settings)
		if err != nil {
			s.close()
			return nil, err
		}
		if err := s.api.DidChangeConfiguration(ctx, &protocol.DidChangeConfigurationParams{Settings: b}); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// diagnose opens files (path: text) and waits until gopls has published
// diagnostics for each.
func (s *server) diagnose(ctx context.Context, files map[string]string) error {
	waits := map[string]chan struct{}{}
	s.mu.Lock()
	for f := range files {
		waits[f] = make(chan struct{})
		s.published[uri.File(f)] = waits[f]
	}
	s.mu.Unlock()
	for f, text := range files {
		if err := s.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
			URI: uri.File(f), LanguageID: "go", Version: 1, Text: text}}); err != nil {
			return fmt.Errorf("didOpen: %w%s", err, s.said())
		}
	}
	for f, ch := range waits {
		select {
		case <-ch:
		case <-s.conn.Done():
			return fmt.Errorf("gopls ended before it published diagnostics%s", s.said())
		case <-ctx.Done():
			return fmt.Errorf("gopls published no diagnostics for %s: %w%s", f, ctx.Err(), s.said())
		}
	}
	return nil
}

// close asks gopls to shut down and exit, and waits for it (killing it
// after 10 s).
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.api.Shutdown(ctx)
	_ = s.api.Exit(ctx)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		_ = s.cmd.Process.Kill()
		<-done
	}
	_ = s.conn.Close()
}

func (s *server) said() string {
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return "; gopls said: " + t
	}
	return ""
}

// client answers what gopls asks of its client, as Berth's does.
type client struct {
	protocol.UnimplementedClient
	s *server
}

func (c *client) PublishDiagnostics(_ context.Context, p *protocol.PublishDiagnosticsParams) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if ch, ok := c.s.published[p.URI]; ok {
		close(ch)
		delete(c.s.published, p.URI)
	}
	return nil
}

func (c *client) Progress(context.Context, *protocol.ProgressParams) error { return nil }

func (c *client) WorkDoneProgressCreate(context.Context, *protocol.WorkDoneProgressCreateParams) error {
	return nil
}

// Configuration answers each item with the section of the entry's
// settings it names, as Berth's client does.
func (c *client) Configuration(_ context.Context, p *protocol.ConfigurationParams) ([]protocol.LSPAny, error) {
	out := make([]protocol.LSPAny, len(p.Items))
	for i, it := range p.Items {
		var v any = c.s.cfg.Settings
		if it.Section != nil && *it.Section != "" {
			for part := range strings.SplitSeq(*it.Section, ".") {
				m, ok := v.(map[string]any)
				if !ok {
					v = nil
					break
				}
				v = m[part]
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("null")
		}
		out[i] = protocol.LSPAny(b)
	}
	return out, nil
}

func (c *client) WorkspaceFolders(context.Context) ([]protocol.WorkspaceFolder, error) {
	return nil, nil
}

func (c *client) RegisterCapability(context.Context, *protocol.RegistrationParams) error { return nil }
func (c *client) LogMessage(context.Context, *protocol.LogMessageParams) error           { return nil }
func (c *client) ShowMessage(context.Context, *protocol.ShowMessageParams) error         { return nil }

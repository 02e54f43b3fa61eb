package structural

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// Provider offers ast_grep, ast_edit and resolve while the structural
// feature is connected for a run.
type Provider struct {
	cfg   Config
	langs *languages
	// Writer applies accepted edits; tests set its Rename hook to inject a
	// failure part-way through.
	Writer *workspace.Writer
	// Observers gives the write observer (the language-server side) that
	// resolve tells of the files it writes, before and after, as a
	// harness's files/willWrite and files/didWrite do, and whose report of
	// new problems it shows. The registry serves it; nil (or a nil
	// observer) leaves a write unchecked, and resolve says so.
	Observers interface {
		WriteObserver() orchestrator.WriteObserver
	}
}

// New loads the grammars and builds the provider. A configured grammar
// library that is required and cannot be loaded is an error.
func New(cfg Config) (*Provider, error) {
	def := DefaultConfig()
	if cfg.MaxResults <= 0 {
		cfg.MaxResults = def.MaxResults
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = def.MaxFileBytes
	}
	if cfg.DiffLines <= 0 {
		cfg.DiffLines = def.DiffLines
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = def.CacheBytes
	}
	langs, err := loadLanguages(cfg.Grammars)
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, langs: langs, Writer: &workspace.Writer{}}, nil
}

// Feature is orchestrator.FeatureStructural.
func (p *Provider) Feature() string { return orchestrator.FeatureStructural }

// Tools returns the three tools; they need the run's working directory.
func (p *Provider) Tools(run *orchestrator.Run) []orchestrator.Tool {
	if run.Workdir == "" {
		return nil
	}
	return []orchestrator.Tool{grepTool{p}, editTool{p}, resolveTool{p}}
}

// Unavailable lists the optional grammars that could not be loaded, by
// name, with the reason (for the server's start-up log).
func (p *Provider) Unavailable() map[string]string {
	out := map[string]string{}
	for n, l := range p.langs.byName {
		if l.unavailable != "" {
			out[n] = l.unavailable
		}
	}
	return out
}

// scope is a resolved search: the language, the compiled pattern and
// where to look.
type scope struct {
	root  *workspace.Root
	start string
	isDir bool
	l     *language
	p     *pattern
	state *runState
}

// prepare resolves path and language and compiles the pattern. A problem
// the model can fix comes back as an error result.
func (p *Provider) prepare(ctx context.Context, run *orchestrator.Run, path, lang, pat string) (*scope, *orchestrator.Result, error) {
	root, err := run.Root()
	if err != nil {
		return nil, nil, err
	}
	start, st, err := root.ResolveStat(path)
	if err != nil {
		return nil, orchestrator.Errorf("%v", err), nil
	}
	if st == nil {
		return nil, orchestrator.Errorf("path %q does not exist in the workspace: pass a file or folder inside %s, relative to it, or omit path to search all of it", path, root.Where()), nil
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		// Said here from the stat; the read itself refuses it again from
		// the open handle, whatever is there by then.
		return nil, orchestrator.Errorf("%v", workspace.NotRegular(root.Rel(start), st.Mode())), nil
	}
	l, err := p.langs.pick(lang, root.Rel(start), st.IsDir())
	if err != nil {
		return nil, orchestrator.Errorf("%v", err), nil
	}
	pt, err := compile(ctx, l, pat)
	if errors.Is(err, ErrPattern) {
		return nil, orchestrator.Errorf("%v", err), nil
	}
	if err != nil {
		return nil, nil, err
	}
	return &scope{root: root, start: start, isDir: st.IsDir(), l: l, p: pt, state: stateOf(run, p.cfg.CacheBytes)}, nil, nil
}

// search runs the scope's pattern over its files.
func (p *Provider) search(ctx context.Context, sc *scope) (*searchResult, error) {
	s := &searcher{l: sc.l, p: sc.p, cache: sc.state.cache, maxBytes: p.cfg.MaxFileBytes, workers: p.cfg.Workers, root: sc.root, langs: p.langs}
	return s.run(ctx, sc.start, sc.isDir)
}

// noFiles is the answer for a folder holding no file of the pattern's
// language, which is a wrong language or path, not an empty search.
func noFiles(sc *scope, found string) *orchestrator.Result {
	where := sc.root.Rel(sc.start)
	if where == "." {
		where = "the workspace"
	}
	return orchestrator.Errorf("no files of language %s under %s (found: %s): pass the language of the files you mean, or a path that holds %s files",
		sc.l.name, where, found, sc.l.name)
}

// decode unmarshals arguments dispatch has already validated.
func decode(args json.RawMessage, v any) *orchestrator.Result {
	if err := json.Unmarshal(args, v); err != nil {
		return orchestrator.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// skippedNote says which files were not searched.
func skippedNote(sk []skippedFile) string {
	if len(sk) == 0 {
		return ""
	}
	s := fmt.Sprintf("\nskipped %d file(s):", len(sk))
	for i, f := range sk {
		if i == 10 {
			s += fmt.Sprintf("\n  … and %d more", len(sk)-10)
			break
		}
		s += fmt.Sprintf("\n  %s (%s)", text.Path(f.rel), f.why)
	}
	return s
}

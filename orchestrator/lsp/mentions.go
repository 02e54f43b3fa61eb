package lsp

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A server that knows only the files it has open (ready "open-files":
// clangd without its background index) renames only in those: asked
// cold, clangd renamed a function in its header alone and the project no
// longer linked (issue 24 item 8). Before such a server is asked for a
// rename, it is shown every file that mentions the name.

// maxMentionFiles bounds the files a server is shown for one rename:
// each is parsed in full (clangd renames in at most 50 files anyway, its
// --rename-file-limit).
const maxMentionFiles = 100

// showMentions opens on s every file of its languages under its root
// that mentions name as a whole identifier (in code, a comment or a
// string alike: one opened too many costs only its parse) and waits until
// s has read each: its diagnostics for the version sent have come, and
// clangd indexes a file before it publishes them. Its rename then sees
// every use. The error says which file s could not be shown, or why the
// search was cut, and that nothing was written.
func showMentions(ctx context.Context, s *server, name string) error {
	refuse := func(format string, a ...any) error {
		return fmt.Errorf("%s knows only the files it has open, and "+format+": its rename could miss uses of %q there, so nothing was written",
			append(append([]any{s.cfg.Name}, a...), name)...)
	}
	if name == "" {
		return fmt.Errorf("%s knows only the files it has open, and the name at the cursor could not be read to find the files that use it: nothing was written; check line and symbol", s.cfg.Name)
	}
	files, err := mentioning(s, name)
	if err != nil {
		return refuse("%v. Rename with ast_edit instead", err)
	}
	if len(files) > maxMentionFiles {
		rels := make([]string, 0, 5)
		for _, f := range files[:5] {
			rels = append(rels, s.paths.rel(f))
		}
		return refuse("%d files mention the name (%s, ...), more than the %d it is shown for one rename. Rename with ast_edit instead",
			len(files), strings.Join(rels, ", "), maxMentionFiles)
	}
	docs := make([]document, len(files))
	for i, abs := range files {
		doc, err := s.sync(ctx, abs, false)
		if err != nil {
			if !errors.Is(err, errGone) {
				err = s.proc.markExited(err)
			}
			return refuse("%s could not be shown to it (%v). Call again", s.paths.rel(abs), err)
		}
		docs[i] = doc
	}
	for i, abs := range files {
		if _, ok := s.diags.wait(ctx, abs, docs[i].syncSeq, docs[i].version); !ok {
			return refuse("it did not finish reading %s within lsp.diagnostics_timeout (%s). Call again; lsp status shows its state",
				s.paths.rel(abs), s.conf.DiagnosticsTimeout)
		}
	}
	return nil
}

// mentioning lists the files of s's languages under its root (skipping
// what workspace.SkipDir names, and links) whose text has name as a whole
// identifier. A file that cannot be read is an error naming it: it may
// use the name.
func mentioning(s *server, name string) ([]string, error) {
	var files []string
	cut, err := s.paths.eachSourceFile(s.paths.root, s.cfg.Extensions, true, func(path string, b []byte) {
		// No identifier holds a newline: the whole text is searched
		// at once.
		if len(identifierAt(string(b), name)) > 0 {
			files = append(files, path)
		}
	})
	if err == nil && cut {
		err = fmt.Errorf("the search for the files that use it stopped after %d files", maxLeftoverFiles)
	}
	return files, err
}

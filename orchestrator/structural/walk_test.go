package structural

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// A folder the walk cannot read is named among the skipped files, not
// passed over in silence. (Tests may run as root, who reads a mode-000
// folder, so the folder here is one that is gone by the time it is read.)
func TestUnreadableFolderIsSaidSkipped(t *testing.T) {
	ctx := context.Background()
	l := testLangs.byName["go"]
	p, err := compile(ctx, l, "done($X)")
	if err != nil {
		t.Fatal(err)
	}
	root, err := workspace.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	s := &searcher{l: l, p: p, cache: newTreeCache(1 << 20), maxBytes: 1 << 20, workers: 2, root: root}
	res, err := s.run(ctx, filepath.Join(root.Dir(), "gone"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.skipped) != 1 || res.skipped[0].rel != "gone/" || !strings.HasPrefix(res.skipped[0].why, "unreadable folder: ") {
		t.Errorf("skipped %+v, want gone/ as an unreadable folder", res.skipped)
	}
}

package main

import (
	"bytes"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

func TestPrintResult(t *testing.T) {
	cases := []struct {
		name string
		res  *orchestrator.Result
		want string
	}{
		{"text", orchestrator.Text("hello\n"), "hello\n"},
		{"image", &orchestrator.Result{Content: []orchestrator.Block{orchestrator.ImageBlock("image/png", "aGVsbG8=")}},
			"[image image/png, 8 bytes of base64; use --json to get it]\n"},
		{"table", &orchestrator.Result{Content: []orchestrator.Block{orchestrator.TableBlock([]string{"name", "n"}, [][]string{{"a", "1"}, {"bbb", "22"}}, true)}},
			"name  n\na     1\nbbb   22\n(rows truncated)\n"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		printResult(&out, c.res)
		if out.String() != c.want {
			t.Errorf("%s: got %q, want %q", c.name, out.String(), c.want)
		}
	}
}

func TestFeatureFlag(t *testing.T) {
	got := featureFlag(" questions, vibe,-lsp,,")
	if len(got) != 3 || !got["questions"] || !got["vibe"] || got["lsp"] {
		t.Fatalf("got %v", got)
	}
}

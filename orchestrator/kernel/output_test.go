package kernel

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/berth-dev/berth/bridge"
)

func TestCapText(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		writes []string
		want   string // exact, or "" to check the cut form
		head   string
		tail   string
	}{
		{name: "under the limit", limit: 10, writes: []string{"abc", "de"}, want: "abcde"},
		{name: "exactly the limit", limit: 4, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "head and tail kept", limit: 10, writes: []string{"01234", "56789", "abcde"}, head: "01234", tail: "abcde"},
		{name: "a cut rune is dropped, not broken", limit: 8, writes: []string{"ééééééé"}, head: "éé", tail: "éé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapText(tt.limit)
			for _, w := range tt.writes {
				c.write(w)
			}
			got := c.String()
			if !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8: %q", got)
			}
			if tt.want != "" {
				if got != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
				return
			}
			if !strings.HasPrefix(got, tt.head+"\n") || !strings.HasSuffix(got, "\n"+tt.tail) || !strings.Contains(got, "of output cut here") {
				t.Errorf("got %q, want head %q, a cut note, tail %q", got, tt.head, tt.tail)
			}
		})
	}
}

func TestBundleBlocks(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		wantType string
		wantText string
	}{
		{"table beats text", `{"application/vnd.berth.table+json": {"columns": ["a"], "rows": [["1"]]}, "text/plain": "   a\n0  1"}`, "table", "   a\n0  1"},
		{"broken table falls back to text", `{"application/vnd.berth.table+json": {"columns": []}, "text/plain": "fallback"}`, "text", "fallback"},
		{"image beats text", `{"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}`, "image", ""},
		{"markdown beats plain", `{"text/markdown": "# T", "text/plain": "T"}`, "text", "# T"},
		{"plain beats html", `{"text/html": "<b>x</b>", "text/plain": "x"}`, "text", "x"},
		{"html when alone", `{"text/html": "<b>x</b>"}`, "text", "<b>x</b>"},
		{"json pretty", `{"application/json": {"k": [1]}}`, "text", "{\n  \"k\": [\n    1\n  ]\n}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.data), &data); err != nil {
				t.Fatal(err)
			}
			o := newOutput(DefaultConfig())
			o.add(bridge.Frame{Type: bridge.TypeDisplay, Cell: "c", Data: data}, "c")
			if len(o.blocks) != 1 {
				t.Fatalf("want one block, got %+v", o.blocks)
			}
			b := o.blocks[0]
			if b.Type != tt.wantType || b.Text != tt.wantText {
				t.Errorf("got %s %q, want %s %q", b.Type, b.Text, tt.wantType, tt.wantText)
			}
		})
	}
}

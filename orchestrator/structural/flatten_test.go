package structural

import (
	"os"
	"testing"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// flattenAPI is the flattening done through the binding's own API, one
// cgo call at a time: the oracle for flattenC.
func flattenAPI(c *sitter.TreeCursor) (nodes []node, errors int) {
	defer c.Close()
	var stack []int32
	for {
		n := c.Node()
		var f uint8
		if n.IsNamed() {
			f |= fNamed
		}
		if n.IsExtra() {
			f |= fExtra
		}
		if n.IsError() {
			f |= fError
			errors++
		}
		if n.IsMissing() {
			f |= fMissing
			errors++
		}
		start, end := n.ByteRange()
		nodes = append(nodes, node{start: uint32(start), end: uint32(end), kind: n.KindId(), flags: f, size: 1})
		if c.GotoFirstChild() {
			stack = append(stack, int32(len(nodes)-1))
			continue
		}
		for !c.GotoNextSibling() {
			if !c.GotoParent() {
				return nodes, errors
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			nodes[top].size = int32(len(nodes)) - top
		}
	}
}

func TestFlattenMatchesTheBindingAPI(t *testing.T) {
	for _, c := range []struct{ lang, file string }{
		{"go", "tree.go"},
		{"go", "testdata/cases/go.yaml"}, // not Go: full of ERROR nodes
		{"python", "testdata/cases/python.yaml"},
	} {
		src, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		l := testLangs.byName[c.lang]
		p := sitter.NewParser()
		if err := p.SetLanguage(l.lang); err != nil {
			t.Fatal(err)
		}
		ts := p.Parse(src, nil)
		var got tree
		got.flattenC(ts)
		want, errs := flattenAPI(ts.Walk())
		ts.Close()
		p.Close()
		if len(got.nodes) != len(want) || got.errors != errs {
			t.Fatalf("%s as %s: %d nodes, %d errors; the API gives %d, %d", c.file, c.lang, len(got.nodes), got.errors, len(want), errs)
		}
		for i := range want {
			if got.nodes[i] != want[i] {
				t.Fatalf("%s as %s: node %d is %+v; the API gives %+v", c.file, c.lang, i, got.nodes[i], want[i])
			}
		}
	}
}

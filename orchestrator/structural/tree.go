package structural

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// Node flags.
const (
	fNamed uint8 = 1 << iota
	fExtra
	fError
	fMissing
)

// node is one syntax node of a flattened tree. Nodes are stored in
// pre-order, so a node's first child is the next node and its next sibling
// is size nodes further on. The flattening is done once per parse so the
// matcher runs in plain Go, without a cgo call per node, and a cached tree
// costs a few bytes a node instead of the C tree's pointers.
type node struct {
	start, end uint32 // byte offsets in tree.src
	size       int32  // nodes in this subtree, itself included
	kind       uint16 // the grammar's public symbol id
	flags      uint8
}

func (n *node) named() bool   { return n.flags&fNamed != 0 }
func (n *node) extra() bool   { return n.flags&fExtra != 0 }
func (n *node) missing() bool { return n.flags&fMissing != 0 }

// tree is a parsed file: its source (without a byte-order mark) and nodes.
type tree struct {
	src    []byte
	nodes  []node
	errors int // ERROR and MISSING nodes
	lang   *sitter.Language
}

// text is the source of node i.
func (t *tree) text(i int32) []byte {
	n := &t.nodes[i]
	return t.src[n.start:n.end]
}

// children appends to buf the children of node i that count for
// matching: not extras (comments), not zero-width MISSING tokens. An
// ERROR node counts even when error recovery marked it extra (tokens it
// skipped): it is code the pattern does not have, so no match may step
// over it as if it were a comment.
func (t *tree) children(i int32, buf []int32) []int32 {
	buf = buf[:0]
	end := i + t.nodes[i].size
	for c := i + 1; c < end; c += t.nodes[c].size {
		f := t.nodes[c].flags
		if f&fMissing == 0 && (f&fExtra == 0 || f&fError != 0) {
			buf = append(buf, c)
		}
	}
	return buf
}

// kindName is the grammar's name for node i's kind.
func (t *tree) kindName(i int32) string { return t.lang.NodeKindForId(t.nodes[i].kind) }

// parse parses src with p and flattens the result. It stops when ctx
// ends: the parser checks a flag as it goes, so even a grammar that loops
// on some input cannot hold a worker for ever.
func parse(ctx context.Context, p *sitter.Parser, lang *sitter.Language, src []byte) (*tree, error) {
	var cancelled atomic.Bool
	stop := context.AfterFunc(ctx, func() { cancelled.Store(true) })
	defer stop()
	opts := &sitter.ParseOptions{ProgressCallback: func(sitter.ParseState) bool { return cancelled.Load() }}
	ts := p.ParseWithOptions(func(i int, _ sitter.Point) []byte {
		if i < len(src) {
			return src[i:]
		}
		return nil
	}, nil, opts)
	if ts == nil {
		// A cancelled parse would resume on the next call: start afresh.
		p.Reset()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the parser gave up")
	}
	defer ts.Close()
	t := &tree{src: src, lang: lang}
	t.flattenC(ts)
	return t, nil
}

// position is node offset off as 1-based line and column (in characters).
func position(src []byte, off uint32) (line, col int) {
	before := src[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	ls := bytes.LastIndexByte(before, '\n') + 1
	col = len(bytes.Runes(before[ls:])) + 1
	return line, col
}

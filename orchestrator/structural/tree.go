package structural

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
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

// innermostErrors lists, in source order, the ERROR and MISSING nodes
// that hold no other one.
func (t *tree) innermostErrors() []int32 {
	var errs []int32
	for i := range t.nodes {
		if t.nodes[i].flags&(fError|fMissing) != 0 {
			errs = append(errs, int32(i))
		}
	}
	var out []int32
	for k, i := range errs {
		if k+1 == len(errs) || errs[k+1] >= i+t.nodes[i].size {
			out = append(out, i)
		}
	}
	return out
}

// kindName is the grammar's name for node i's kind.
func (t *tree) kindName(i int32) string { return t.lang.NodeKindForId(t.nodes[i].kind) }

// parser is a tree-sitter parser for one language, with the flag its
// parses are cancelled through.
//
// Cancellation does not use ParseOptions' progress callback: go-tree-sitter
// v0.25.0's ParseWithOptions saves the options with go-pointer (a map
// entry and a 1-byte C allocation) on every call and never releases them
// (upstream tree-sitter/go-tree-sitter#55), which kept ~80 B per parse for
// the life of the process even when one options value was reused. The
// parser's cancellation flag is read by the C parser as it goes, costs
// nothing per parse, and is set from the current call's context.
type parser struct {
	ts   *sitter.Parser
	lang *sitter.Language
	// flag is the word the C parser polls; non-zero stops the parse. It is
	// pinned, since C keeps its address between calls.
	flag *uintptr
	pin  runtime.Pinner
}

// newParser makes a parser for lang; close it when done.
func newParser(lang *sitter.Language) (*parser, error) {
	ts := sitter.NewParser()
	if err := ts.SetLanguage(lang); err != nil {
		ts.Close()
		return nil, err
	}
	p := &parser{ts: ts, lang: lang, flag: new(uintptr)}
	p.pin.Pin(p.flag)
	ts.SetCancellationFlag(p.flag)
	return p, nil
}

// close frees the C parser and unpins its flag.
func (p *parser) close() {
	p.ts.SetCancellationFlag(nil)
	p.ts.Close()
	p.pin.Unpin()
}

// parse parses src and flattens the result. It stops when ctx ends: the
// parser checks its flag as it goes, so even a grammar that loops on some
// input cannot hold a worker for ever. One parser parses one source at a
// time.
func (p *parser) parse(ctx context.Context, src []byte) (*tree, error) {
	atomic.StoreUintptr(p.flag, 0)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		atomic.StoreUintptr(p.flag, 1)
		close(fired)
	})
	ts := p.ts.Parse(src, nil)
	if !stop() {
		// The flag was set, or is being set: wait, so it cannot stop the
		// next parse instead.
		<-fired
	}
	if ts == nil {
		// A cancelled parse would resume on the next call: start afresh.
		p.ts.Reset()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the parser gave up")
	}
	defer ts.Close()
	t := &tree{src: src, lang: p.lang}
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

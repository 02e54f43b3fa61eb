package structural

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

// The few tree-sitter declarations this file needs, as in
// tree_sitter/api.h of the runtime go-tree-sitter compiles in. The
// functions are that runtime's: nothing here is a second copy of it.
typedef struct TSTree TSTree;
typedef struct { uint32_t context[4]; const void *id; const TSTree *tree; } TSNode;
typedef struct { const void *tree; const void *id; uint32_t context[3]; } TSTreeCursor;

TSNode ts_tree_root_node(const TSTree *self);
uint32_t ts_node_descendant_count(TSNode self);
uint16_t ts_node_symbol(TSNode self);
uint32_t ts_node_start_byte(TSNode self);
uint32_t ts_node_end_byte(TSNode self);
bool ts_node_is_named(TSNode self);
bool ts_node_is_extra(TSNode self);
bool ts_node_is_error(TSNode self);
bool ts_node_is_missing(TSNode self);
TSTreeCursor ts_tree_cursor_new(TSNode node);
void ts_tree_cursor_delete(TSTreeCursor *self);
TSNode ts_tree_cursor_current_node(const TSTreeCursor *self);
bool ts_tree_cursor_goto_first_child(TSTreeCursor *self);
bool ts_tree_cursor_goto_next_sibling(TSTreeCursor *self);
bool ts_tree_cursor_goto_parent(TSTreeCursor *self);
void ts_set_allocator(void *(*)(size_t), void *(*)(size_t, size_t), void *(*)(void *, size_t), void (*)(void *));

// berth_node has the layout of the Go type node.
typedef struct { uint32_t start, end; int32_t size; uint16_t kind; uint8_t flags; } berth_node;

enum { F_NAMED = 1, F_EXTRA = 2, F_ERROR = 4, F_MISSING = 8 };

static uint32_t berth_count(const TSTree *tree) {
	return ts_node_descendant_count(ts_tree_root_node(tree));
}

// berth_flatten writes the tree's nodes in pre-order; it returns how many,
// or -1 if cap was too small. *errors counts ERROR and MISSING nodes.
static int64_t berth_flatten(const TSTree *tree, berth_node *out, int64_t cap, int32_t *errors) {
	TSTreeCursor c = ts_tree_cursor_new(ts_tree_root_node(tree));
	int64_t n = 0, depth = 0, stack_cap = 64;
	int32_t *stack = malloc(sizeof(int32_t) * stack_cap);
	*errors = 0;
	for (;;) {
		if (n == cap) { n = -1; break; }
		TSNode node = ts_tree_cursor_current_node(&c);
		uint8_t f = 0;
		if (ts_node_is_named(node)) f |= F_NAMED;
		if (ts_node_is_extra(node)) f |= F_EXTRA;
		if (ts_node_is_error(node)) { f |= F_ERROR; (*errors)++; }
		if (ts_node_is_missing(node)) { f |= F_MISSING; (*errors)++; }
		out[n] = (berth_node){ts_node_start_byte(node), ts_node_end_byte(node), 1, ts_node_symbol(node), f};
		n++;
		if (ts_tree_cursor_goto_first_child(&c)) {
			if (depth == stack_cap) {
				stack_cap *= 2;
				stack = realloc(stack, sizeof(int32_t) * stack_cap);
			}
			stack[depth++] = (int32_t)(n - 1);
			continue;
		}
		bool done = false;
		while (!ts_tree_cursor_goto_next_sibling(&c)) {
			if (!ts_tree_cursor_goto_parent(&c)) { done = true; break; }
			int32_t top = stack[--depth];
			out[top].size = (int32_t)(n - top);
		}
		if (done) break;
	}
	free(stack);
	ts_tree_cursor_delete(&c);
	return n;
}

// berth_use_libc_allocator makes the runtime allocate with malloc
// directly. go-tree-sitter v0.25.0 installs callbacks that go from C into
// Go and back into C.malloc/C.free for every allocation, which makes
// parsing several times slower and changes nothing else: both paths use
// the one libc heap, so memory allocated before the switch is freed
// correctly after it. The switch is process-wide; it stays safe only as
// long as nothing in the binary calls tree_sitter.SetAllocator with
// functions of its own (nothing in Berth does).
static void berth_use_libc_allocator(void) { ts_set_allocator(NULL, NULL, NULL, NULL); }
*/
import "C"

import (
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// init checks, before anything parses, the assumptions this file makes
// about go-tree-sitter's internals (pinned at v0.25.0 in go.mod), and
// then switches the runtime to the plain allocator. A failed check is a
// build that must not run (a binding upgrade changed a layout), so it
// stops the process at start with what to fix; any test run catches it.
func init() {
	var (
		n  node
		st sitter.Tree
		sn sitter.Node
		sc sitter.TreeCursor
	)
	switch {
	case unsafe.Sizeof(n) != C.sizeof_berth_node || unsafe.Offsetof(n.kind) != unsafe.Offsetof(C.berth_node{}.kind) || unsafe.Offsetof(n.flags) != unsafe.Offsetof(C.berth_node{}.flags):
		panic("structural: node and berth_node differ in layout: make them agree in flatten.go and tree.go")
	case unsafe.Sizeof(st) != unsafe.Sizeof(uintptr(0)):
		panic("structural: go-tree-sitter's Tree is no longer a single *TSTree, which cTree reads: update cTree for this version and run TestFlattenMatchesTheBindingAPI")
	case unsafe.Sizeof(sn) != C.sizeof_TSNode || unsafe.Sizeof(sc) != C.sizeof_TSTreeCursor:
		panic("structural: TSNode or TSTreeCursor as declared in flatten.go differ from the runtime's api.h: copy the runtime's declarations")
	}
	C.berth_use_libc_allocator()
}

// cTree is the runtime's tree inside a go-tree-sitter Tree. The binding
// keeps it in an unexported field, its only one (init checks the size),
// and offers no accessor; TestFlattenMatchesTheBindingAPI checks the
// result of reading it against the binding's own API, node for node.
func cTree(t *sitter.Tree) *C.TSTree { return *(**C.TSTree)(unsafe.Pointer(t)) }

// flattenC records every node of ts in one call into C, instead of
// several cgo calls per node.
func (t *tree) flattenC(ts *sitter.Tree) {
	ct := cTree(ts)
	n := int64(C.berth_count(ct))
	for {
		t.nodes = make([]node, n)
		var errs C.int32_t
		got := int64(C.berth_flatten(ct, (*C.berth_node)(unsafe.Pointer(&t.nodes[0])), C.int64_t(n), &errs))
		if got >= 0 {
			t.nodes = t.nodes[:got]
			t.errors = int(errs)
			return
		}
		n *= 2
	}
}

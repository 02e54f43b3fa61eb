// Package structural implements ast_grep, ast_edit and resolve: structural
// search and staged rewrites on tree-sitter grammars (compiled in, or loaded
// at run time from a shared library named in the configuration).
//
// It compiles a pattern by parsing it with the same grammar as the files,
// inside a ladder of scaffolds; matches it against parsed files node by
// node; and stages rewrites per run until resolve accepts or discards them.
//
// It must never write a file except through resolve's all-or-nothing
// workspace writer, never read outside the run's working directory, and
// never link a second tree-sitter runtime.
package structural

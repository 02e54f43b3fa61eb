// Package lsp serves the language-server tools of a run: lsp (read-only
// queries), lsp_rename (a project-wide rename through the all-or-nothing
// writer) and diagnostics on write (the orchestrator.WriteObserver behind
// files/willWrite and files/didWrite).
//
// A server starts for a file only when a root marker exists at or above the
// file inside the working directory and its executable resolves in the run's
// enclosure; otherwise the tool says which half is missing. Servers run in
// the run's enclosure, one per (root, server), and end with the run. A
// server is composed of its process and connection (process), whether it
// has loaded the project (loadState), its paths across the enclosure's
// boundary (pathMap) and how it departs from the protocol (quirks:
// tsserver's load probe and diagnostics, clangd's open files).
//
// It must never report silence as clean, never report a diagnostic it has
// already reported for the same file as new, never write a rename in part,
// and never let a failing language server turn a successful write into an
// error.
package lsp

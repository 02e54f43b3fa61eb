// Package orchestrator is Berth's core: the tool model (Tier, Surface, Spec,
// Tool, Provider, Result), runs and their lifecycle, the registry that lists
// a run's tools for a surface, and dispatch, which validates arguments,
// enforces tiers, serialises tools that are not parallel-safe, applies the
// call timeout, records metrics and turns a panicking tool into an error
// result.
//
// It must never import a tool package (lsp, structural, debug, kernel, ask,
// vibe) nor the protocol package (rpc): tools plug in as Providers, and the
// harness is reached only through the Harness interface a Run carries.
package orchestrator

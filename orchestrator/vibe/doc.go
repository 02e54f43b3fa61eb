// Package vibe implements the vibe_* tools: background workers a lead agent
// spawns, steers, waits for and kills. A worker runs the command configured
// for its tier (vibe.runners.fast, vibe.runners.good: an argv, never a
// shell line) in the run's working directory through the run's enclosure,
// with its assignment (the brief, then every message sent since) on stdin.
// Its stdout is its result; exit status 0 means it succeeded.
//
// Workers belong to one run: ending the run kills every worker process and
// everything it started. The package must never start a process any other
// way than through the run's enclosure, never run a runner through a shell,
// and never hold more output than its configured caps.
package vibe

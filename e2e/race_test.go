//go:build race

package e2e

// raceEnabled builds the binary under test with the race detector too, so
// a data race in the server fails the end-to-end run.
const raceEnabled = true

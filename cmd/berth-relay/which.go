//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// whichMode prints the absolute path of an executable, looked up in the
// relay's PATH (the enclosure's), and exits 1 when there is none.
func whichMode(args []string) int {
	if len(args) != 1 || args[0] == "" {
		return fail("which: want one name\n%s", usage)
	}
	path, err := exec.LookPath(args[0])
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth-relay: which: %v (PATH=%s)\n", err, os.Getenv("PATH"))
		return 1
	}
	fmt.Println(path)
	return 0
}

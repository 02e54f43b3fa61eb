//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// versionMode prints the relay's version: the first 16 hex digits of the
// SHA-256 of its own executable. Any change to the relay, its build or
// its toolchain is a new version, so a copy whose version matches is the
// very binary Berth carries; there is no number to remember to bump.
func versionMode(args []string) int {
	if len(args) != 0 {
		return fail("version takes no arguments")
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return fail("version: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fail("version: %v", err)
	}
	fmt.Println(hex.EncodeToString(h.Sum(nil))[:16])
	return 0
}

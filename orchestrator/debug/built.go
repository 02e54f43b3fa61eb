package debug

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
)

// builtPrefix starts the name of every binary an adapter builds for a
// launch (delve's), in the temporary directory.
const builtPrefix = "berth-debug-"

// builtPath is a fresh path for a launch's binary. It carries this
// process's pid, so that a later Berth can tell the files of a Berth that
// was killed (kill -9 leaves them: nothing of it runs to remove them)
// from those of one that still runs.
func builtPath() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%s", builtPrefix, os.Getpid(), hex.EncodeToString(b[:])))
}

// sweepBuilt removes the stale built binaries in dir and returns their
// names. A file is stale when the Berth whose pid it carries is gone, or,
// whatever its name (pid-less names came before pids, and a pid may have
// been reused), when it is older than maxAge: no session lives that long.
// Only regular files are touched; the sweep is best effort.
func sweepBuilt(dir string, maxAge time.Duration) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, builtPrefix) || !e.Type().IsRegular() {
			continue
		}
		stale := false
		if pid, ok := builtPID(name); ok && !procfs.Alive(pid) {
			stale = true
		} else if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > maxAge {
			stale = true
		}
		if stale && os.Remove(filepath.Join(dir, name)) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

// builtPID is the pid in a name made by builtPath.
func builtPID(name string) (int, bool) {
	rest := strings.TrimPrefix(name, builtPrefix)
	i := strings.IndexByte(rest, '-')
	if i <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:i])
	return pid, err == nil && pid > 0
}

//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSunPath is the longest path a unix socket's address holds (108 bytes
// with the NUL).
const maxSunPath = 107

// connectStdio connects to the unix socket at path (a longer path than
// an address holds is reached through its directory's descriptor), writes
// token and a newline, and returns the socket: blocking, and closed on
// exec, as a program's stdin must be (a non-blocking stdin fails reads
// with EAGAIN in most runtimes). The relay uses raw calls here, not the
// net package, whose descriptors are non-blocking.
func connectStdio(path, token string) (int, error) {
	if token == "" {
		return -1, errors.New("the token's line on stdin is empty: the caller gives the one its listener expects")
	}
	addr := path
	if len(path) > maxSunPath {
		dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(dir)
		addr = "/proc/self/fd/" + strconv.Itoa(dir) + "/" + filepath.Base(path)
		if len(addr) > maxSunPath {
			return -1, errors.New("the socket's name is too long for a unix address")
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: addr}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	msg := []byte(token + "\n")
	for len(msg) > 0 {
		n, err := unix.Write(fd, msg)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		msg = msg[n:]
	}
	return fd, nil
}

// maxToken bounds the token line --token-stdin reads.
const maxToken = 256

// readToken reads the first line of f, a byte at a time so that nothing
// after it is taken from what follows (the framed stdin), and returns it
// without its newline.
func readToken(f *os.File) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < maxToken {
		n, err := f.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return string(line), nil
			}
			line = append(line, b[0])
			continue
		}
		if err != nil {
			return "", fmt.Errorf("stdin ended before the token's line: %w", err)
		}
	}
	return "", fmt.Errorf("no newline in the first %d bytes of stdin: the token is one line", maxToken)
}

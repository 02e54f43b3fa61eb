package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tokenEnv names the environment variable that may hold the bearer token.
const tokenEnv = "BERTH_TOKEN"

// loadToken returns the bearer token for the WebSocket transport: from the
// token file, else BERTH_TOKEN, else a fresh one written to a file only the
// user can read (as Jupyter does); path is that file when one was made.
func loadToken(tokenFile string) (token, path string, err error) {
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("token file: %w: pass a readable file with --token-file (or rpc.token_file), or omit it to have a token generated", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", "", fmt.Errorf("token file %s is empty: put the token in it, or omit --token-file to have one generated", tokenFile)
		}
		return t, "", nil
	}
	if t := strings.TrimSpace(os.Getenv(tokenEnv)); t != "" {
		return t, "", nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(b[:])
	path, err = tokenPath()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", "", fmt.Errorf("token: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return "", "", fmt.Errorf("token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.WriteString(token + "\n")
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", "", fmt.Errorf("token: writing %s: %w", path, err)
	}
	return token, path, nil
}

// tokenPath is $XDG_RUNTIME_DIR/berth/token, else
// ~/.local/share/berth/token.
func tokenPath() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "berth", "token"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("token: no XDG_RUNTIME_DIR and no home directory to keep a generated token in: pass --token-file or set %s", tokenEnv)
	}
	return filepath.Join(home, ".local", "share", "berth", "token"), nil
}

package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGeneratedTokenIsPrivate(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	t.Setenv(tokenEnv, "")
	token, path, err := loadToken("")
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "berth", "token") || len(token) != 64 {
		t.Fatalf("got %q at %q", token, path)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v; want 0600", st.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != token+"\n" {
		t.Fatalf("file holds %q", b)
	}
}

func TestTokenSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(" from-file \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenEnv, "from-env")
	if tok, path, err := loadToken(file); err != nil || tok != "from-file" || path != "" {
		t.Fatalf("token file: %q %q %v", tok, path, err)
	}
	if tok, _, err := loadToken(""); err != nil || tok != "from-env" {
		t.Fatalf("env: %q %v", tok, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadToken(empty); err == nil {
		t.Fatal("an empty token file was accepted")
	}
}

package debug

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// adapterFor picks the adapter that debugs program (an absolute host
// path): by extension, a directory holding a package's files (a Go
// package for delve), or a native executable.
func (p *Provider) adapterFor(program, shown string) (*Adapter, error) {
	st, err := os.Stat(program)
	if err != nil {
		return nil, fmt.Errorf("program %s does not exist: pass an existing file or package directory inside the working directory", shown)
	}
	for i := range p.cfg.Adapters {
		a := &p.cfg.Adapters[i]
		switch {
		case st.IsDir():
			if a.PackageExtension != "" && hasFileWith(program, a.PackageExtension) {
				return a, nil
			}
		case hasExtension(program, a.Extensions):
			return a, nil
		case a.Native && isNative(program, st):
			return a, nil
		}
	}
	var kinds []string
	for _, a := range p.cfg.Adapters {
		var k []string
		k = append(k, a.Extensions...)
		if a.PackageExtension != "" {
			k = append(k, "a directory of "+a.PackageExtension+" files")
		}
		if a.Native {
			k = append(k, "a native executable")
		}
		kinds = append(kinds, fmt.Sprintf("%s (%s)", a.ID, strings.Join(k, ", ")))
	}
	return nil, fmt.Errorf("no adapter debugs %s: pass a program one of them knows: %s", shown, strings.Join(kinds, "; "))
}

func hasExtension(path string, exts []string) bool {
	for _, e := range exts {
		if strings.EqualFold(filepath.Ext(path), e) {
			return true
		}
	}
	return false
}

func hasFileWith(dir, ext string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ext) {
			return true
		}
	}
	return false
}

// isNative says whether the file is an executable ELF or Mach-O binary.
func isNative(path string, st os.FileInfo) bool {
	if st.Mode()&0o111 == 0 {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := f.Read(head); err != nil {
		return false
	}
	for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xce, 0xfa, 0xed, 0xfe}, {0xca, 0xfe, 0xba, 0xbe}} {
		if bytes.Equal(head, magic) {
			return true
		}
	}
	return false
}

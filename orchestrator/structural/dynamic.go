package structural

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

static void *berth_dlopen(const char *path, char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) *err = dlerror();
	return h;
}

static void *berth_dlsym(void *h, const char *sym, char **err) {
	dlerror();
	void *f = dlsym(h, sym);
	if (!f) *err = dlerror();
	return f;
}

typedef const void *(*berth_language_fn)(void);

static const void *berth_call_language(void *f) { return ((berth_language_fn)f)(); }
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// loadLibrary opens a grammar's shared library and returns its language,
// after checking that this runtime can parse with it. The library stays
// open for the life of the process, as the language points into it.
func loadLibrary(path, symbol string) (*sitter.Language, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("grammar library %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("grammar library %s is a directory: name the .so file", path)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.berth_dlopen(cpath, &cerr)
	if h == nil {
		return nil, fmt.Errorf("grammar library %s cannot be loaded: %s", path, C.GoString(cerr))
	}
	csym := C.CString(symbol)
	defer C.free(unsafe.Pointer(csym))
	f := C.berth_dlsym(h, csym, &cerr)
	if f == nil {
		C.dlclose(h)
		return nil, fmt.Errorf("grammar library %s has no symbol %s (%s): name the library's tree_sitter_<language> function", path, symbol, C.GoString(cerr))
	}
	ptr := C.berth_call_language(f)
	if ptr == nil {
		C.dlclose(h)
		return nil, fmt.Errorf("grammar library %s: %s returned no language", path, symbol)
	}
	lang := sitter.NewLanguage(unsafe.Pointer(ptr))
	if v := lang.AbiVersion(); v < sitter.MIN_COMPATIBLE_LANGUAGE_VERSION || v > sitter.LANGUAGE_VERSION {
		C.dlclose(h)
		return nil, fmt.Errorf("grammar library %s has ABI version %d; this build of tree-sitter reads versions %d to %d: regenerate the grammar with a matching tree-sitter CLI",
			path, v, sitter.MIN_COMPATIBLE_LANGUAGE_VERSION, sitter.LANGUAGE_VERSION)
	}
	return lang, nil
}

// expandPath expands a leading "~" and $VARS in a configured path.
func expandPath(p string) string {
	p = os.ExpandEnv(p)
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	return p
}

package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every key "orchestrator config" can print, of every section (the core's
// and each tool family's), is documented in README.md as `section.key`
// (`section.list[].key` inside a list of entries).
func TestReadmeDocumentsEveryConfigKey(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	c := defaultConfig()
	keys, ptrs, err := sections(&c)
	if err != nil {
		t.Fatal(err)
	}
	for i, section := range keys {
		for _, key := range configKeys(section, reflect.TypeOf(ptrs[i]).Elem()) {
			if !strings.Contains(string(readme), "`"+key+"`") {
				t.Errorf("README.md does not document %s: add it, with its default and meaning, to the Configuration section", key)
			}
		}
	}
}

// configKeys lists the dotted YAML keys of a configuration struct; the
// fields of a list's entries are named with "[]".
func configKeys(prefix string, t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + "." + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			// A group of keys (vibe.runners): its keys are documented.
			out = append(out, configKeys(key, ft)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, key)
			out = append(out, configKeys(key+"[]", ft.Elem())...)
		default:
			out = append(out, key)
		}
	}
	return out
}

// Package configdoc writes docs/configuration.md from the configuration
// structs themselves: every key comes from a field's yaml tag, its
// default from the value that holds the built-in configuration, and its
// meaning from the field's doc comment, read from the Go source with
// go/parser. The reference therefore cannot drift from the code: the
// orchestrator's test renders it and compares it with the file, and `go
// generate ./cmd/orchestrator` rewrites the file.
package configdoc

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-dev/berth/internal/markdown"
)

// Section is one top-level section of the configuration file.
type Section struct {
	// Key is the section's YAML key (rpc, lsp, ...).
	Key string
	// Config points at the struct the section decodes into, holding the
	// built-in defaults.
	Config any
	// About is a sentence or two on what the section configures.
	About string
}

// Source says where the Go source of the configuration structs is.
type Source struct {
	// Module is the module's path (github.com/berth-dev/berth) and Root
	// its directory: a package's source is Root plus the path after
	// Module.
	Module, Root string
	// Main is the directory of package main, whose types' PkgPath is
	// "main".
	Main string
}

// Doc is what the document says around the keys.
type Doc struct {
	// Head is the Markdown before the sections (title, summary, the
	// file's rules, an example); Tail follows them.
	Head, Tail string
	Sections   []Section
}

// Key is one documented key.
type Key struct {
	Name    string // dotted, with [] for a list's entries
	Default string // Markdown: a code span, or a fenced YAML block
	Short   string // the default for the overview table: one short cell
	Meaning string // Markdown paragraphs, from the doc comment
	Entry   bool   // a field of a list's entries
}

// Keys lists every key of the sections, in file order, with its default
// and meaning. A field without a doc comment is an error naming it.
func Keys(src Source, sections []Section) ([][]Key, error) {
	r := reader{src: src, docs: map[string]map[string]map[string]string{}}
	out := make([][]Key, len(sections))
	for i, s := range sections {
		v := reflect.ValueOf(s.Config)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("section %s: Config must point at a struct, got %T", s.Key, s.Config)
		}
		keys, err := r.walk(s.Key, v.Elem(), false)
		if err != nil {
			return nil, err
		}
		out[i] = keys
	}
	return out, nil
}

// Render writes the whole document.
func Render(src Source, d Doc) ([]byte, error) {
	all, err := Keys(src, d.Sections)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(strings.TrimSpace(d.Head) + "\n\n")
	b.WriteString("## Sections\n\n")
	for _, s := range d.Sections {
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", s.Key, markdown.Anchor(s.Key), s.About)
	}
	for i, s := range d.Sections {
		about := s.About
		if about != "" {
			about = strings.ToUpper(about[:1]) + about[1:]
		}
		fmt.Fprintf(&b, "\n## `%s`\n\n%s\n\n", s.Key, about)
		b.WriteString("| key | default |\n|---|---|\n")
		for _, k := range all[i] {
			fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", k.Name, markdown.Anchor(k.Name), k.Short)
		}
		for _, k := range all[i] {
			fmt.Fprintf(&b, "\n### `%s`\n\n", k.Name)
			if k.Entry {
				fmt.Fprintf(&b, "Set in each entry; unset: %s.\n\n", k.Default)
			} else if strings.HasPrefix(k.Default, "```") {
				fmt.Fprintf(&b, "Default:\n\n%s\n\n", k.Default)
			} else {
				fmt.Fprintf(&b, "Default: %s.\n\n", k.Default)
			}
			b.WriteString(k.Meaning + "\n")
		}
	}
	if t := strings.TrimSpace(d.Tail); t != "" {
		b.WriteString("\n" + t + "\n")
	}
	return b.Bytes(), nil
}

type reader struct {
	src Source
	// docs[pkgPath][type][field] is the field's doc comment.
	docs map[string]map[string]map[string]string
}

func (r *reader) walk(prefix string, v reflect.Value, entry bool) ([]Key, error) {
	t := v.Type()
	var out []Key
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + "." + name
		doc, err := r.doc(t, f.Name)
		if err != nil {
			return nil, err
		}
		if doc == "" {
			return nil, fmt.Errorf("%s (field %s of %s.%s) has no doc comment: say what it does above the field", key, f.Name, t.PkgPath(), t.Name())
		}
		fv := v.Field(i)
		k := Key{Name: key, Meaning: meaning(doc, f.Name, key), Entry: entry}
		k.Default, k.Short, err = value(fv, entry)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, k)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			if fv.IsNil() {
				fv = reflect.New(ft).Elem() // no default: its keys' zero values
			} else {
				fv = fv.Elem()
			}
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}):
			sub, err := r.walk(key, fv, entry)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			sub, err := r.walk(key+"[]", reflect.New(ft.Elem()).Elem(), true)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
	}
	return out, nil
}

// value renders a default: the whole value, and a cell for the table.
func value(v reflect.Value, entry bool) (string, string, error) {
	if d, ok := v.Interface().(time.Duration); ok {
		s := "`" + Duration(d) + "`"
		return s, s, nil
	}
	s, err := flow(v)
	if err != nil {
		return "", "", err
	}
	if v.Kind() == reflect.String && s == "" || s == `""` {
		s = `""`
	}
	list := v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct && v.Len() > 0
	if !strings.Contains(s, "\n") && !list {
		c := "`" + s + "`"
		if entry {
			return c, "per entry", nil
		}
		return c, c, nil
	}
	if entry {
		return "empty", "per entry", nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v.Interface()); err != nil {
		return "", "", err
	}
	short := "see below"
	if list {
		short = fmt.Sprintf("%d entries, below", v.Len())
		if v.Len() == 1 {
			short = "1 entry, below"
		}
	}
	return "```yaml\n" + strings.TrimRight(b.String(), "\n") + "\n```", short, nil
}

// flow writes a scalar, or a list of scalars, on one line as YAML does
// ([docker]); anything else in YAML's block style.
func flow(v reflect.Value) (string, error) {
	if v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Struct && v.Type().Elem().Kind() != reflect.Map {
		var items []string
		for i := range v.Len() {
			s, err := flow(v.Index(i))
			if err != nil {
				return "", err
			}
			items = append(items, s)
		}
		return "[" + strings.Join(items, ", ") + "]", nil
	}
	y, err := yaml.Marshal(v.Interface())
	return strings.TrimSpace(string(y)), err
}

// Duration writes d as the file would: 1h, 30m, 1m30s, 1.5s, 500ms.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// meaning turns a doc comment into Markdown: its paragraphs, with the
// field's Go name at the start replaced by its key.
func meaning(doc, field, key string) string {
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(doc), "\n\n") {
		paras = append(paras, strings.Join(strings.Fields(p), " "))
	}
	if rest, ok := strings.CutPrefix(paras[0], field); ok && (rest == "" || strings.ContainsRune(" ,:;.", rune(rest[0]))) {
		paras[0] = "`" + key + "`" + rest
	}
	for i, p := range paras {
		paras[i] = escape(p)
	}
	return strings.Join(paras, "\n\n")
}

var special = regexp.MustCompile(`[<>*\\]`)

// escape keeps the text outside code spans literal in Markdown.
func escape(s string) string {
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = special.ReplaceAllStringFunc(parts[i], func(m string) string {
			switch m {
			case "<":
				return "&lt;"
			case ">":
				return "&gt;"
			}
			return `\` + m
		})
	}
	return strings.Join(parts, "`")
}

// doc returns the doc comment of a struct's field (its line comment when
// it has none above it).
func (r *reader) doc(t reflect.Type, field string) (string, error) {
	pkg := t.PkgPath()
	if r.docs[pkg] == nil {
		dir := r.src.Main
		if pkg != "main" {
			rest, ok := strings.CutPrefix(pkg, r.src.Module)
			if !ok {
				return "", fmt.Errorf("type %s.%s is outside module %s", pkg, t.Name(), r.src.Module)
			}
			dir = filepath.Join(r.src.Root, filepath.FromSlash(strings.TrimPrefix(rest, "/")))
		}
		m, err := parseDir(dir)
		if err != nil {
			return "", err
		}
		r.docs[pkg] = m
	}
	fields, ok := r.docs[pkg][t.Name()]
	if !ok {
		return "", fmt.Errorf("struct %s not found in the source of %s", t.Name(), pkg)
	}
	return fields[field], nil
}

// parseDir reads the doc comments of every struct's fields in a
// package's files; a type of the package's own files wins over a test
// file's of the same name (an external test package's, say).
func parseDir(dir string) (map[string]map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]map[string]string{}
	fromTest := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") {
			continue
		}
		test := strings.HasSuffix(n, "_test.go")
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			if _, seen := out[ts.Name.Name]; seen && (test || !fromTest[ts.Name.Name]) {
				return true
			}
			fields := map[string]string{}
			for _, fl := range st.Fields.List {
				text := fl.Doc.Text()
				if text == "" {
					text = fl.Comment.Text()
				}
				for _, name := range fl.Names {
					fields[name.Name] = text
				}
			}
			out[ts.Name.Name] = fields
			fromTest[ts.Name.Name] = test
			return true
		})
	}
	return out, nil
}

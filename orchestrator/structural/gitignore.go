package structural

import (
	"bufio"
	"bytes"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// ignoreRule is one line of a .gitignore file.
type ignoreRule struct {
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
	// anchored rules match the path relative to base; the others match
	// the name alone, at any depth.
	anchored bool
	base     string // the folder of the .gitignore, absolute
}

// ignorer is the stack of rules in force in one folder: its own
// .gitignore's rules after those of every folder above it, so a later
// (deeper) rule wins, as in git.
type ignorer struct {
	rules []ignoreRule
}

func parseIgnore(dir string, b []byte) []ignoreRule {
	var rules []ignoreRule
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") {
			continue
		}
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
			line = line[:len(line)-1]
		}
		if line == "" {
			continue
		}
		r := ignoreRule{base: dir}
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, "\\!") || strings.HasPrefix(line, "\\#") {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			r.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		re, err := regexp.Compile("^" + globToRegexp(line) + "$")
		if err != nil {
			continue
		}
		r.re = re
		rules = append(rules, r)
	}
	return rules
}

// globToRegexp translates a gitignore glob: "*" and "?" stay within one
// path element, "**" crosses them, "[...]" is a class.
func globToRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case c == '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// with returns the ignorer for a subfolder that has rules of its own.
func (ig *ignorer) with(rules []ignoreRule) *ignorer {
	if len(rules) == 0 {
		return ig
	}
	all := make([]ignoreRule, 0, len(ig.rules)+len(rules))
	all = append(append(all, ig.rules...), rules...)
	return &ignorer{rules: all}
}

// ignored says whether path (absolute) is ignored; the last rule that
// matches decides.
func (ig *ignorer) ignored(path string, isDir bool) bool {
	name := filepath.Base(path)
	for i := len(ig.rules) - 1; i >= 0; i-- {
		r := &ig.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		subject := name
		if r.anchored {
			rel, ok := workspace.Inside(r.base, path)
			if !ok {
				continue
			}
			subject = rel
		}
		if r.re.MatchString(subject) {
			return !r.negate
		}
	}
	return false
}

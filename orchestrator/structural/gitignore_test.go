package structural

import "testing"

func TestIgnoreRules(t *testing.T) {
	root := &ignorer{}
	top := root.with(parseIgnore("/w", []byte("# comment\n\n*.log\nbuild/\n/only-top.go\ndocs/**/*.go\n!keep.log\nsp\\ ace \n[abc].go\n**/deep/x.go\n")))
	sub := top.with(parseIgnore("/w/sub", []byte("!again.log\nlocal.go\n")))
	cases := []struct {
		ig    *ignorer
		path  string
		isDir bool
		want  bool
	}{
		{top, "/w/a.log", false, true},
		{top, "/w/x/y/a.log", false, true},
		{top, "/w/keep.log", false, false},
		{top, "/w/build", true, true},
		{top, "/w/build", false, false}, // build/ names folders only
		{top, "/w/x/build", true, true},
		{top, "/w/only-top.go", false, true},
		{top, "/w/x/only-top.go", false, false}, // anchored at /w
		{top, "/w/docs/a/b/c.go", false, true},
		{top, "/w/docs/c.go", false, true},
		{top, "/w/sp ace", false, true},
		{top, "/w/b.go", false, true},
		{top, "/w/d.go", false, false},
		{top, "/w/p/q/deep/x.go", false, true},
		{top, "/w/deep/x.go", false, true},
		{sub, "/w/sub/again.log", false, false}, // a deeper rule wins
		{sub, "/w/sub/other.log", false, true},
		{sub, "/w/sub/local.go", false, true},
		{top, "/w/local.go", false, false},
	}
	for _, c := range cases {
		if got := c.ig.ignored(c.path, c.isDir); got != c.want {
			t.Errorf("ignored(%s, dir=%v) = %v, want %v", c.path, c.isDir, got, c.want)
		}
	}
}

// An anchored rule matches a name that merely starts with "..": the
// matcher's own "relative to the rule's folder" took "/w/..cache" for a
// path outside /w; it now uses workspace.Inside.
//
// Issue 12 item 4.
func TestAnchoredRuleMatchesDotDotName(t *testing.T) {
	ig := (&ignorer{}).with(parseIgnore("/w", []byte("/..cache\n")))
	if !ig.ignored("/w/..cache", false) {
		t.Error("/..cache does not ignore /w/..cache")
	}
	if ig.ignored("/w/x/..cache", false) {
		t.Error("/..cache, anchored at /w, ignores /w/x/..cache")
	}
}

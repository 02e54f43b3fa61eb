package markdown

import "testing"

func TestAnchorIsGitHubs(t *testing.T) {
	for in, want := range map[string]string{
		"lsp.servers[].name":                              "lspserversname",
		"Language servers: what stays inside the workdir": "language-servers-what-stays-inside-the-workdir",
		"Harness → Berth":                                 "harness--berth",
		"stdin and stdout (kubernetes.stdio)":             "stdin-and-stdout-kubernetesstdio",
		"What is in deploy/":                              "what-is-in-deploy",
	} {
		if got := Anchor(in); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", in, got, want)
		}
	}
}

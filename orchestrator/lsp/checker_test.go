package lsp

// problemLines shows checker problems as the checker's answer lists them.
func problemLines(ps []checkProblem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

package kernel

import (
	"os"
	"path/filepath"

	"github.com/berth-dev/berth/orchestrator"
)

// interpreter picks the executable for a language. Python prefers the
// working directory's own environment (.venv, then venv): a PATH python is
// a different environment, and packages the project installed would be
// missing in a way that reads like broken code.
func interpreter(cfg Config, run *orchestrator.Run, lang string) (string, error) {
	if lang == JavaScript {
		return cfg.Node, nil
	}
	for _, dir := range []string{".venv", "venv"} {
		host := filepath.Join(run.Workdir, dir, "bin", "python")
		if st, err := os.Stat(host); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return run.Enclosure.MapPath(host)
		}
	}
	return cfg.Python, nil
}

package kernel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
)

func TestInterpreterChoice(t *testing.T) {
	tests := []struct {
		name  string
		envs  []string // environments in the workdir with an executable bin/python
		plain []string // environments whose bin/python is not executable
		lang  string
		want  string // relative to the workdir, or a configured name
	}{
		{name: "none: the configured python", want: "/usr/bin/python3"},
		{name: ".venv", envs: []string{".venv"}, want: ".venv/bin/python"},
		{name: "venv", envs: []string{"venv"}, want: "venv/bin/python"},
		{name: ".venv before venv", envs: []string{"venv", ".venv"}, want: ".venv/bin/python"},
		{name: "a python that cannot run is skipped", plain: []string{".venv"}, want: "/usr/bin/python3"},
		{name: "javascript ignores python environments", envs: []string{".venv"}, lang: JavaScript, want: "node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, env := range append(append([]string{}, tt.envs...), tt.plain...) {
				bin := filepath.Join(dir, env, "bin")
				if err := os.MkdirAll(bin, 0o755); err != nil {
					t.Fatal(err)
				}
				mode := os.FileMode(0o755)
				if i >= len(tt.envs) {
					mode = 0o644
				}
				if err := os.WriteFile(filepath.Join(bin, "python"), nil, mode); err != nil {
					t.Fatal(err)
				}
			}
			run := orchestrator.NewRun("r", "c", dir, host.New(), nil, nil)
			defer run.End(orchestrator.EndStopped)
			lang := tt.lang
			if lang == "" {
				lang = Python
			}
			got, err := interpreter(testConfig(), run, lang)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if filepath.Base(want) == "python" {
				want = filepath.Join(dir, want)
			}
			if got != want {
				t.Errorf("interpreter = %s, want %s", got, want)
			}
		})
	}
}

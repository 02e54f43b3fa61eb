package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// Issue 15 item 5: images/berth builds on the slim Debian base, runs as
// non-root by default, has the relay next to Berth, and serves the
// protocol with its Dart grammar loaded (ast_grep finds a Dart match in
// a workdir mounted into the container).
func TestBerthImageRunsAsNonRootAndServesDart(t *testing.T) {
	docker := "/usr/bin/docker"
	tag := fmt.Sprintf("berth/berth:deploy-test-%d", os.Getpid())
	build := exec.Command("../images/berth/build", tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("images/berth/build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(docker, "image", "rm", "-f", tag).Run() })
	label := "berth.conversation=deploy-image-test"
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(docker, append([]string{"run", "--rm", "--pull", "never", "--network", "none", "--label", label}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker run %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if uid := run("--entrypoint", "id", tag, "-u"); uid != "65532" {
		t.Errorf("the image runs as uid %s, want the non-root 65532", uid)
	}
	if v := run("--entrypoint", "/usr/local/bin/berth-relay", tag, "version"); v == "" {
		t.Errorf("the relay next to Berth printed no version")
	}

	// A workdir the container's non-root user can read, at the same path
	// inside, as a sidecar's shared volume is.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"lib/panel.dart": "class Panel {\n  void close() {\n    if (ctrl != null) ctrl.dispose();\n  }\n}\n"})
	for _, p := range []string{dir, filepath.Join(dir, "lib")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "lib/panel.dart"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(docker, "run", "-i", "--rm", "--pull", "never", "--network", "none", "--label", label,
		"-v", dir+":"+dir+":ro", tag, "serve", "--stdio", "--config", "/etc/berth/berth.yaml")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("the container exited badly: %v\n%s", err, stderr.String())
		}
	}()
	if _, err := c.Initialize(ctx, "berth-deploy-image", "test"); err != nil {
		t.Fatalf("initialize: %v\n%s", err, stderr.String())
	}
	r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "ast_grep", map[string]any{"pattern": "if ($X != null) $X.dispose()", "language": "dart"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(res); res.IsError || !strings.Contains(got, "lib/panel.dart:3:5") {
		t.Errorf("ast_grep for Dart in the image: %s", got)
	}
}

package deploy_test

import (
	"bytes"
	"os"
	"testing"

	"go.yaml.in/yaml/v3"
)

// readYAML decodes a file; strictly, a field the target does not know is
// an error (a target that reads only part of a file is not strict).
func readYAML(t *testing.T, file string, into any, strict bool) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(strict)
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

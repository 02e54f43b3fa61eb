package configdoc

import (
	"strings"
	"testing"
	"time"
)

type documented struct {
	// Limit caps the things, in bytes.
	Limit int `yaml:"limit"`
	// Wait is how long.
	Wait time.Duration `yaml:"wait"`
	// Items lists the entries.
	Items []item `yaml:"items"`
}

type item struct {
	// Name names it.
	Name string `yaml:"name"`
}

type undocumented struct {
	Limit int `yaml:"limit"`
}

func TestKeysCarryDefaultAndMeaning(t *testing.T) {
	src := Source{Module: "github.com/berth-dev/berth/cmd/orchestrator/internal/configdoc", Root: ".", Main: "."}
	c := documented{Limit: 8, Wait: 90 * time.Minute, Items: []item{{Name: "a"}}}
	keys, err := Keys(src, []Section{{Key: "s", Config: &c}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys[0] {
		got = append(got, k.Name+"="+k.Short+": "+k.Meaning)
	}
	want := []string{
		"s.limit=`8`: `s.limit` caps the things, in bytes.",
		"s.wait=`1h30m`: `s.wait` is how long.",
		"s.items=1 entry, below: `s.items` lists the entries.",
		"s.items[].name=per entry: `s.items[].name` names it.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFieldWithoutDocCommentIsAnError(t *testing.T) {
	_, err := Keys(Source{Module: "github.com/berth-dev/berth/cmd/orchestrator/internal/configdoc", Root: ".", Main: "."}, []Section{{Key: "s", Config: &undocumented{}}})
	if err == nil || !strings.Contains(err.Error(), "s.limit (field Limit") || !strings.Contains(err.Error(), "no doc comment") {
		t.Fatalf("got %v, want an error naming s.limit", err)
	}
}

func TestDurationIsWrittenShort(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", 3 * time.Minute: "3m", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s", 500 * time.Millisecond: "500ms"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
	}
}

package rpc

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/errclass"
)

// docs/protocol.md's table of the classes is the mapping's: every class,
// its code and its advice, as classCodes has them.
//
// Issue 27 item 3.
func TestProtocolDocListsTheMapping(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[errclass.Class][]string{}
	for _, l := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != 4 || !strings.HasPrefix(cells[0], "`") {
			continue
		}
		rows[errclass.Class(strings.Trim(cells[0], "`"))] = cells
	}
	for _, c := range errclass.All {
		row, ok := rows[c]
		if !ok {
			t.Errorf("docs/protocol.md has no row for class %q", c)
			continue
		}
		if want := "`" + strconv.FormatInt(codeOf(c), 10) + "`"; row[1] != want {
			t.Errorf("docs/protocol.md gives class %q the code %s; the mapping gives %s", c, row[1], want)
		}
		if row[3] != Advice(c) {
			t.Errorf("docs/protocol.md's advice for class %q:\n  %s\nthe mapping's:\n  %s", c, row[3], Advice(c))
		}
	}
}

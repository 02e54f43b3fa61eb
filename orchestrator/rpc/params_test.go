package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeParamsRequiredFields(t *testing.T) {
	type p struct {
		Name  string            `json:"name"`
		Args  json.RawMessage   `json:"args"`
		Paths []string          `json:"paths"`
		Flags map[string]bool   `json:"flags"`
		Ptr   *EnclosureParam   `json:"ptr"`
		Extra map[string]string `json:"extra,omitempty"`
	}
	required := []string{"name", "args", "paths", "flags", "ptr"}
	full := `{"name":"n","args":{},"paths":["a"],"flags":{},"ptr":"host"}`
	var v p
	if err := decodeParams("m", json.RawMessage(full), &v, required...); err != nil {
		t.Fatalf("complete params refused: %v", err)
	}
	for _, tc := range []struct{ field, value string }{
		{"name", `""`}, {"name", `null`}, {"args", `null`}, {"args", `""`}, {"args", `[]`},
		{"paths", `[]`}, {"paths", `null`}, {"flags", `null`}, {"ptr", `null`},
	} {
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(full), &m)
		m[tc.field] = json.RawMessage(tc.value)
		b, _ := json.Marshal(m)
		var v p
		err := decodeParams("m", b, &v, required...)
		if err == nil || !strings.Contains(err.Error(), `field "`+tc.field+`" is required`) {
			t.Errorf("%s = %s: got %v", tc.field, tc.value, err)
		}
		delete(m, tc.field)
		b, _ = json.Marshal(m)
		v = p{}
		if err := decodeParams("m", b, &v, required...); err == nil || !strings.Contains(err.Error(), `field "`+tc.field+`" is required`) {
			t.Errorf("%s missing: got %v", tc.field, err)
		}
	}
}

func TestRequiringANumberIsAMistake(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("requiring an int field did not panic: its zero cannot be told from a missing field")
		}
	}()
	var v struct {
		N int `json:"n"`
	}
	_ = decodeParams("m", json.RawMessage(`{"n":0}`), &v, "n")
}

package rpc

import (
	"encoding/json"
	"reflect"
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

// tools/call's params, written without reflection, read as what
// json.Marshal writes (which also escapes <, > and & inside the arguments).
func TestCallToolParamsEncode(t *testing.T) {
	for _, p := range []CallToolParams{
		{RunID: "r1", Name: "lsp", Arguments: json.RawMessage(`{"action":"references","file":"a<b>.go","line":3}`)},
		{RunID: "r\"2", Surface: "plan", Name: "x\n"},
		{RunID: "r3", Name: "eval", Arguments: json.RawMessage(`[]`)},
	} {
		got, err := p.encode()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(p)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("encode wrote invalid JSON %s: %v", got, err)
		}
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("encode:\n got %s\nwant %s", got, want)
		}
	}
	if _, err := (CallToolParams{RunID: "r", Name: "x", Arguments: json.RawMessage(`{"a":`)}).encode(); err == nil {
		t.Error("invalid arguments were sent")
	}
}

// What CallToolParams.read takes, decodeParams reads the same.
func checkCallToolRead(t *testing.T, raw []byte) {
	t.Helper()
	var fast CallToolParams
	if !fast.read(raw) {
		return
	}
	var slow CallToolParams
	if err := decodeParams("tools/call", raw, &slow, "runId", "name"); err != nil {
		t.Fatalf("read took %q, which decodeParams refuses: %v", raw, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: read %+v, decodeParams %+v", raw, fast, slow)
	}
}

func TestCallToolParamsRead(t *testing.T) {
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`{"runId":"r1","name":"lsp","arguments":{"action":"references","line":3}}`, true},
		{` { "runId" : "r\u0031" , "surface" : "plan" , "name" : "x" , "arguments" : [1, {"a":"}"}] } `, true},
		{`{"runId":"r1","name":"lsp","arguments":null}`, true},
		{`{"runId":"r1","name":"lsp"}`, true},
		// Left to decodeParams.
		{`{"runId":"r1","name":"lsp","extra":1}`, false},
		{`{"RunId":"r1","name":"lsp"}`, false},
		{`{"runId":"","name":"lsp"}`, false},
		{`{"runId":"r1"}`, false},
		{`{"runId":null,"name":"lsp"}`, false},
		{`{"runId":"r1","name":"lsp","name":"x"}`, false},
		{`{"runId":"r1","name":"lsp"} {}`, false},
		{`{"runId":"r1","name":"lsp","arguments":{"a":}}`, false},
		{`[]`, false},
	} {
		var p CallToolParams
		if got := p.read([]byte(tc.raw)); got != tc.ok {
			t.Errorf("read(%s) = %v, want %v", tc.raw, got, tc.ok)
		}
		checkCallToolRead(t, []byte(tc.raw))
	}
}

func FuzzCallToolParamsRead(f *testing.F) {
	f.Add([]byte(`{"runId":"r1","surface":"full","name":"lsp","arguments":{"a":[1,"b"]}}`))
	f.Fuzz(checkCallToolRead)
}

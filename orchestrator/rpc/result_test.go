package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// TestBlockFields pins the fields appendBlock and readBlock know: a
// new field in orchestrator.Block must be added there too.
func TestBlockFields(t *testing.T) {
	var got []string
	typ := reflect.TypeFor[orchestrator.Block]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		got = append(got, f.Name+" "+f.Type.String()+" "+f.Tag.Get("json"))
	}
	want := []string{
		"Type string type", "Text string text,omitempty", "Data string data,omitempty",
		"MimeType string mimeType,omitempty", "Columns []string columns,omitempty",
		"Rows [][]string rows,omitempty", "Truncated bool truncated,omitempty",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("orchestrator.Block changed: its fields are\n%s\nupdate appendBlock and readBlock in result.go, then this list", strings.Join(got, "\n"))
	}
	if typ := reflect.TypeFor[orchestrator.Result](); typ.NumField() != 2 {
		t.Fatalf("orchestrator.Result has %d fields: update appendResult and readResult in result.go", typ.NumField())
	}
}

func sampleResults() []*orchestrator.Result {
	return []*orchestrator.Result{
		nil,
		{},
		{Content: []orchestrator.Block{}},
		orchestrator.Text(""),
		orchestrator.Text("main.go:12:6: func Greet(name string) string {\n\treturn \"hi \" + name\n}"),
		orchestrator.Errorf("bad: <a href=\"x\">&amp;</a> \\ \x00\x01\x1f \b\f\r\t"),
		orchestrator.Text("naïve 日本語 😀 \u2028 \u2029 \xff\xfe broken \xe2\x82"),
		{Content: []orchestrator.Block{
			orchestrator.TextBlock("a"),
			orchestrator.ImageBlock("image/png", "iVBORw0KGgo="),
			orchestrator.TableBlock([]string{"a", "b <c>"}, [][]string{{"1", "2"}, nil, {}, {"x\ny"}}, true),
			{Type: "table", Columns: []string{}, Rows: [][]string{}},
		}, IsError: true},
	}
}

func TestAppendResultMatchesMarshal(t *testing.T) {
	for _, r := range sampleResults() {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendResult(nil, r); !bytes.Equal(got, want) {
			t.Errorf("appendResult:\n got %s\nwant %s", got, want)
		}
	}
}

// decodeStd is what json.Unmarshal makes of data.
func decodeStd(data []byte) (orchestrator.Result, error) {
	var r orchestrator.Result
	err := json.Unmarshal(data, &r)
	return r, err
}

func TestReadResultRoundTrip(t *testing.T) {
	for _, r := range sampleResults() {
		if r == nil {
			continue
		}
		data := appendResult(nil, r)
		got, ok := readResult(data)
		if !ok {
			t.Errorf("readResult refused its own output %s", data)
			continue
		}
		want, err := decodeStd(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("readResult(%s)\n got %#v\nwant %#v", data, got, want)
		}
	}
}

func TestReadResultShapes(t *testing.T) {
	for _, tc := range []struct {
		data string
		ok   bool
	}{
		{` { "content" : [ { "type" : "text" , "text" : "a\/b\u00e9\u0041" } ] , "isError" : true } `, true},
		{`{"isError":false,"content":[]}`, true},
		{`{"content":null}`, true},
		{`{}`, true},
		{`{"content":[{"type":"table","columns":null,"rows":null}]}`, true},
		{`{"content":[{"type":"table","rows":[null,["a"]]}]}`, true},
		{`{"\u0063ontent":[]}`, true},
		// Left to encoding/json, which decides.
		{`{"content":[],"extra":1}`, false},
		{`{"Content":[]}`, false},
		{`{"content":[],"content":[]}`, false},
		{`{"content":[{"type":null}]}`, false},
		{`{"content":[{"type":"text","text":"\ud83d\ude00"}]}`, false},
		{`{"content":[{"type":"text","text":"` + "\xff" + `"}]}`, false},
		{`{"content":[{"type":"text","text":"` + "\n" + `"}]}`, false},
		{`{"content":[{"type":"text","text":"\x"}]}`, false},
		{`{"content":[]}}`, false},
		{`{"content":[]},"id":1`, false},
		{`{"content":[`, false},
		{`null`, false},
		{`[]`, false},
		{``, false},
	} {
		got, ok := readResult([]byte(tc.data))
		if ok != tc.ok {
			t.Errorf("readResult(%s): ok %v, want %v", tc.data, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		want, err := decodeStd([]byte(tc.data))
		if err != nil {
			t.Errorf("readResult accepted %s, which encoding/json refuses: %v", tc.data, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("readResult(%s)\n got %#v\nwant %#v", tc.data, got, want)
		}
	}
}

// A Result through a connection, both ways: the fast paths meet the
// slow ones of the other side.
func TestResultThroughConn(t *testing.T) {
	r := sampleResults()[len(sampleResults())-1]
	_, b := connPair(t, HandlerFunc(func(context.Context, *Request) (any, error) { return r, nil }), nil)
	var got orchestrator.Result
	if err := b.Call(t.Context(), "x", nil, &got); err != nil {
		t.Fatal(err)
	}
	want, _ := decodeStd(appendResult(nil, r))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	var raw json.RawMessage
	if err := b.Call(t.Context(), "x", nil, &raw); err != nil {
		t.Fatal(err)
	}
	if std, _ := json.Marshal(r); !bytes.Equal(raw, std) {
		t.Fatalf("on the wire:\n%s\nwant\n%s", raw, std)
	}
}

// A typed nil *Result is refused as json.Unmarshal refuses it, not with
// a panic.
func TestCallIntoNilResult(t *testing.T) {
	_, b := connPair(t, HandlerFunc(func(context.Context, *Request) (any, error) { return orchestrator.Text("x"), nil }), nil)
	if err := b.Call(t.Context(), "x", nil, (*orchestrator.Result)(nil)); err == nil {
		t.Fatal("a nil *Result took the result")
	}
}

func FuzzResult(f *testing.F) {
	f.Add("text", "hello\n\tworld", "", false)
	f.Add("table", "<&>", "\xff\u2028", true)
	f.Fuzz(func(t *testing.T, typ, text, cell string, isErr bool) {
		r := &orchestrator.Result{IsError: isErr, Content: []orchestrator.Block{
			{Type: typ, Text: text},
			{Type: typ, Columns: []string{cell, text}, Rows: [][]string{{cell}, nil}, Truncated: isErr},
		}}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		data := appendResult(nil, r)
		if !bytes.Equal(data, want) {
			t.Fatalf("appendResult:\n got %q\nwant %q", data, want)
		}
		got, ok := readResult(data)
		std, err := decodeStd(data)
		if err != nil {
			t.Fatal(err)
		}
		if !ok { // the encoder writes no surrogate escape: all of it is read
			t.Fatalf("readResult refused %q", data)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("readResult(%q)\n got %#v\nwant %#v", data, got, std)
		}
	})
}

// FuzzReadResult: whatever readResult accepts, encoding/json reads the
// same.
func FuzzReadResult(f *testing.F) {
	for _, r := range sampleResults() {
		f.Add(appendResult(nil, r))
	}
	f.Add([]byte(`{"content":[{"type":"text","text":"\u00e9\/"}],"isError":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := readResult(data)
		if !ok {
			return
		}
		std, err := decodeStd(data)
		if err != nil {
			t.Fatalf("readResult accepted %q, which encoding/json refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("readResult(%q)\n got %#v\nwant %#v", data, got, std)
		}
	})
}

package rpc

import (
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

// What the library refuses is answered in Berth's words, with JSON-RPC's
// code for it, under the message's id when one can be read (issue 27
// item 4: jsonrpc2.DecodeMessage is the only check).
func TestRefusalsAreWordedAndAnsweredUnderTheirID(t *testing.T) {
	cases := []struct {
		name, body string
		code       int64
		want       string // in the error message
		id         string // the id the refusal is answered under
	}{
		{"not json", `{"jsonrpc":`, CodeParseError, "not valid JSON", "null"},
		{"garbage", `hello`, CodeParseError, "not valid JSON", "null"},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"m"} {}`, CodeParseError, "not valid JSON", "null"},
		{"an unfinished array", `[1,2`, CodeParseError, "not valid JSON", "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, CodeInvalidRequest, "must be a JSON object (batches are not supported), got an array", "null"},
		{"number", `42`, CodeInvalidRequest, "got a number", "null"},
		{"string", `"just a string"`, CodeInvalidRequest, "must be a JSON object", "null"},
		{"no version", `{"id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, "1"},
		{"old version", `{"jsonrpc":"1.0","id":"a","method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, `"a"`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, CodeInvalidRequest, `"id" that is a string or an integer`, "null"},
		{"integer id with a fraction", `{"jsonrpc":"2.0","id":7.0,"method":"m"}`, CodeInvalidRequest, "digits only, within 64 bits", "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, CodeInvalidRequest, `a string "method"`, "1"},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"m","result":1}`, CodeInvalidRequest, `never a "method"`, "1"},
		{"neither result nor error", `{"jsonrpc":"2.0","id":2}`, CodeInvalidRequest, `exactly one of "result" and "error"`, "2"},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"bad"}`, CodeInvalidRequest, `"error" {code, message}`, "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := jsonrpc2.DecodeMessage([]byte(c.body)); err == nil {
				t.Fatal("the library decoded it")
			}
			id, _, e := refusal([]byte(c.body))
			if e.Code != c.code || !strings.Contains(e.Message, c.want) {
				t.Fatalf("got %d %q, want code %d containing %q", e.Code, e.Message, c.code, c.want)
			}
			if got := string(jsonrpc2.AppendResponse(nil, id, nil, nil)); !strings.Contains(got, `"id":`+c.id+`,`) {
				t.Fatalf("answered as %s, want id %s", got, c.id)
			}
		})
	}
}

// FuzzRefusal: every message the library refuses gets an answer the
// library (and so a harness) can read.
func FuzzRefusal(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"m"}`, `[]`, `{"id":null}`, `{"jsonrpc":"2.0","id":"a\u00e9"}`, "{\"id\":\"\xff\"}", `"x"`, `{"id":1.0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := jsonrpc2.DecodeMessage(b); err == nil {
			return
		}
		id, reason, e := refusal(b)
		if reason == "" || e.Code != CodeParseError && e.Code != CodeInvalidRequest {
			t.Fatalf("%q: refused as %q %d", b, reason, e.Code)
		}
		if _, err := jsonrpc2.DecodeMessage(jsonrpc2.AppendResponse(nil, id, nil, e.toWire())); err != nil {
			t.Fatalf("%q: the refusal does not decode: %v", b, err)
		}
	})
}

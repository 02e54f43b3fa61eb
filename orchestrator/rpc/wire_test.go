package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeClassifiesMessages(t *testing.T) {
	cases := []struct {
		name, body string
		code       int64  // 0: valid
		want       string // in the error message
		response   bool
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, 0, "", false},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"m"}`, 0, "", false},
		{"notification", `{"jsonrpc":"2.0","method":"m"}`, 0, "", false},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{}}`, 0, "", true},
		{"error response", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no"}}`, 0, "", true},
		{"not json", `{"jsonrpc":`, CodeParseError, "not valid JSON", false},
		{"garbage", `hello`, CodeParseError, "not valid JSON", false},
		{"array", `[1,2]`, CodeInvalidRequest, "batches are not supported", false},
		{"number", `42`, CodeInvalidRequest, "got number", false},
		{"no version", `{"id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, false},
		{"old version", `{"jsonrpc":"1.0","id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, false},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, CodeInvalidRequest, `"id" must be a string or an integer`, false},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, CodeInvalidRequest, `"id" must be`, false},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":7}`, CodeInvalidRequest, `"method" must be a non-empty string`, false},
		{"string params", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, CodeInvalidRequest, `"params" must be an object`, false},
		{"nothing", `{"jsonrpc":"2.0"}`, CodeInvalidRequest, `needs "method"`, false},
		{"both result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}`, CodeInvalidRequest, "exactly one", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decode([]byte(c.body))
			if c.code == 0 {
				if d.err != nil {
					t.Fatalf("unexpected error %v", d.err)
				}
				if d.isResponse() != c.response {
					t.Fatalf("isResponse = %v", d.isResponse())
				}
				return
			}
			if d.err == nil || d.err.Code != c.code || !strings.Contains(d.err.Message, c.want) {
				t.Fatalf("got %+v, want code %d containing %q", d.err, c.code, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"m"}`, `[]`, `{"id":null}`, `{"jsonrpc":"2.0","id":1,"error":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := decode(b)
		if d.err == nil && d.msg.Method == "" && !d.hasID {
			t.Fatalf("accepted a message that is neither request nor response: %q", b)
		}
	})
}

// Ids read without a parse name the same request as ids read with one.
func TestIDKeysAgree(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{"7", "7.0"}, {"0", "-0"}, {"123456789012345", "1.23456789012345e14"}, {"42", "4.2e1"}} {
		if idKey(json.RawMessage(tc.a)) != idKey(json.RawMessage(tc.b)) {
			t.Errorf("%s and %s have different keys: %q, %q", tc.a, tc.b, idKey(json.RawMessage(tc.a)), idKey(json.RawMessage(tc.b)))
		}
	}
	for _, id := range []string{"7", "0", `"x"`, "1.0"} {
		if !validID(json.RawMessage(id)) {
			t.Errorf("%s: not a valid id", id)
		}
	}
	for _, id := range []string{"1.5", "null", "[]", "{}", "true", "007"} {
		if validID(json.RawMessage(id)) {
			t.Errorf("%s: taken for a valid id", id)
		}
	}
}

// sameDecoded says quickRequest read body as decode does.
func sameDecoded(t *testing.T, body []byte, q decoded) {
	t.Helper()
	d := decode(body)
	if d.err != nil {
		t.Fatalf("quickRequest took %q, which decode refuses: %v", body, d.err)
	}
	if q.hasID != d.hasID || string(q.msg.ID) != string(d.msg.ID) || q.msg.Method != d.msg.Method {
		t.Fatalf("%q: quickRequest read id %s (%v) method %q; decode id %s (%v) method %q", body, q.msg.ID, q.hasID, q.msg.Method, d.msg.ID, d.hasID, d.msg.Method)
	}
	if strings.TrimSpace(string(q.msg.Params)) != strings.TrimSpace(string(d.msg.Params)) {
		t.Fatalf("%q: quickRequest read params %s, decode %s", body, q.msg.Params, d.msg.Params)
	}
}

func TestQuickRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{string(requestBytes(json.RawMessage("12"), "tools/call", json.RawMessage(`{"runId":"r1","name":"lsp","arguments":{"a":"}"}}`))), true},
		{string(requestBytes(nil, "$/cancelRequest", json.RawMessage(`{"id":3}`))), true},
		{`{"jsonrpc":"2.0","id":0,"method":"m","params":[1,2]}`, true},
		{`{"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": 1}}  `, true}, // Python's json.dumps
		{`{"method":"m","params":{},"id":"a","jsonrpc":"2.0"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"a\"b"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"m"}`, true},
		// Left to decode.
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{},"id":2}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1},"x":{"b":2}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":}}`, false},
		{`{"jsonrpc":"2.0","id":01,"method":"m","params":{}}`, false},
		{`{"jsonrpc":"2.0","id":1.5,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":{},"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"","params":{}}`, false},
		{`{"jsonrpc":"1.0","id":1,"method":"m"}`, false},
		{`{"id":1,"method":"m"}`, false},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"m"} {}`, false},
	} {
		q, ok := quickRequest([]byte(tc.body))
		if ok != tc.ok {
			t.Errorf("quickRequest(%s): ok %v, want %v", tc.body, ok, tc.ok)
			continue
		}
		if ok {
			sameDecoded(t, []byte(tc.body), q)
		}
	}
}

func FuzzQuickRequest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,"}"]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"m","params":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, ok := quickRequest(b); ok {
			sameDecoded(t, b, q)
		}
	})
}

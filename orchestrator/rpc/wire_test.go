package rpc

import (
	"strings"
	"testing"

	"go.lsp.dev/jsonrpc2"
)

func TestDecodeClassifiesMessages(t *testing.T) {
	cases := []struct {
		name, body string
		code       int64  // 0: valid
		want       string // in the error message
		id         string // the id the refusal is answered under ("null" or the id)
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`, 0, "", ""},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"m"}`, 0, "", ""},
		{"notification", `{"jsonrpc":"2.0","method":"m"}`, 0, "", ""},
		{"array params", `{"jsonrpc":"2.0","id":0,"method":"m","params":[1,2]}`, 0, "", ""},
		{"null params", `{"jsonrpc":"2.0","id":-4,"method":"m","params":null}`, 0, "", ""},
		{"response", `{"jsonrpc":"2.0","id":3,"result":{}}`, 0, "", ""},
		{"error response", `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no"}}`, 0, "", ""},
		{"members in any order and spacing", ` { "params" : {} , "method" : "m" , "id" : 9 , "jsonrpc" : "2.0" } `, 0, "", ""},
		{"not json", `{"jsonrpc":`, CodeParseError, "not valid JSON", "null"},
		{"garbage", `hello`, CodeParseError, "not valid JSON", "null"},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"m"} {}`, CodeParseError, "not valid JSON", "null"},
		{"broken params", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":}}`, CodeParseError, "not valid JSON", "null"},
		{"array", `[1,2]`, CodeInvalidRequest, "batches are not supported", "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, CodeInvalidRequest, "must be a JSON object (batches are not supported); got array", "null"},
		{"empty batch", `[]`, CodeInvalidRequest, "batches are not supported", "null"},
		{"number", `42`, CodeInvalidRequest, "got number", "null"},
		{"no version", `{"id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, "1"},
		{"old version", `{"jsonrpc":"1.0","id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, "1"},
		{"escaped version", `{"jsonrpc":"2\u002e0","id":1,"method":"m"}`, CodeInvalidRequest, `"jsonrpc" must be "2.0"`, "1"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"m"}`, CodeInvalidRequest, `"id" must be a string or an integer`, "null"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"m"}`, CodeInvalidRequest, `"id" must be a string or an integer, got null`, "null"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, CodeInvalidRequest, `"id" must be`, "null"},
		{"integer id with a fraction", `{"jsonrpc":"2.0","id":7.0,"method":"m"}`, CodeInvalidRequest, `digits only, within 64 bits), got 7.0`, "null"},
		{"id beyond 64 bits", `{"jsonrpc":"2.0","id":99999999999999999999,"method":"m"}`, CodeInvalidRequest, `"id" must be`, "null"},
		{"method not string", `{"jsonrpc":"2.0","id":1,"method":7}`, CodeInvalidRequest, `"method" must be a non-empty string`, "1"},
		{"empty method", `{"jsonrpc":"2.0","id":"e","method":""}`, CodeInvalidRequest, `"method" must be a non-empty string`, `"e"`},
		{"string params", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, CodeInvalidRequest, `"params" must be an object`, "1"},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"m","result":1}`, CodeInvalidRequest, "never both", "1"},
		{"nothing", `{"jsonrpc":"2.0"}`, CodeInvalidRequest, `needs "method"`, "null"},
		{"neither result nor error", `{"jsonrpc":"2.0","id":2}`, CodeInvalidRequest, "exactly one", "2"},
		{"both result and error", `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}`, CodeInvalidRequest, "exactly one", "1"},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"bad"}`, CodeInvalidRequest, `"error" must be an object`, "1"},
		{"fractional code", `{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`, CodeInvalidRequest, "an integer code", "1"},
		{"code beyond 32 bits", `{"jsonrpc":"2.0","id":1,"error":{"code":4294967296,"message":"x"}}`, CodeInvalidRequest, "an integer code", "1"},
		{"null message", `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}}`, CodeInvalidRequest, "a string message", "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg, r := decode([]byte(c.body))
			if c.code == 0 {
				if r != nil || msg == nil {
					t.Fatalf("refused: %+v", r.err)
				}
				return
			}
			if r == nil || r.drop || r.err.Code != c.code || !strings.Contains(r.err.Message, c.want) {
				t.Fatalf("got %+v, want code %d containing %q", r, c.code, c.want)
			}
			if got := string(jsonrpc2.AppendResponse(nil, r.id, nil, nil)); !strings.Contains(got, `"id":`+c.id+`,`) {
				t.Fatalf("answered as %s, want id %s", got, c.id)
			}
		})
	}
}

// An error about a message the peer could not read carries no id Berth
// could answer under: it is logged, not answered (an answer could go back
// and forth for ever).
func TestErrorWithoutAnIDIsNotAnswered(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
		`{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid"}}`,
		`{"id":null,"error":"whatever"}`,
	} {
		if _, r := decode([]byte(body)); r == nil || !r.drop {
			t.Errorf("%s: got %+v, want it dropped", body, r)
		}
	}
}

// FuzzDecode: Berth's checks are at least as strict as the library's
// decoding, so the library never refuses a message they passed (decode
// would answer it with its fallback error); a passed call or response has
// an id to answer or match, and every refusal is one the library writes.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m"}`, `[]`, `{"id":null}`, `{"jsonrpc":"2.0","id":1,"error":{}}`,
		`{"jsonrpc":"2.0","id":"a\u00e9","method":"m\n","params":[{"x":"}"}]}`,
		`{"jsonrpc":"2.0","id":1,"id":null,"method":"m"}`,
		`{"jsonrpc":"2.0","\u0069d":1,"method":"m"}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"x","data":null,"code":7}}`,
		`{"jsonrpc":"2.0","id":-9223372036854775808,"result":null}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"m\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, r := decode(b)
		if r == nil {
			switch m := msg.(type) {
			case *jsonrpc2.Call:
				if !m.ID().IsValid() || m.Method() == "" {
					t.Fatalf("%q: passed as a call without an id or a method", b)
				}
			case *jsonrpc2.Response:
				if !m.ID().IsValid() {
					t.Fatalf("%q: passed as a response without an id", b)
				}
			case *jsonrpc2.Notification:
			default:
				t.Fatalf("%q: passed as %#v", b, msg)
			}
			return
		}
		if msg != nil || r.err == nil {
			t.Fatalf("%q: a refusal with a message, or without an error", b)
		}
		if strings.Contains(r.err.Message, "not one the JSON-RPC layer reads") {
			t.Fatalf("%q: Berth's checks passed a message the library refuses: %s", b, r.err.Message)
		}
		if !r.drop {
			if _, err := jsonrpc2.DecodeMessage(jsonrpc2.AppendResponse(nil, r.id, nil, r.err.toWire())); err != nil {
				t.Fatalf("%q: the refusal does not decode: %v", b, err)
			}
		}
	})
}

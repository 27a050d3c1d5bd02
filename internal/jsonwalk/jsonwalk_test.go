package jsonwalk

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestInvalidString(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{`{"a":"ok"}`, "", false},
		{"{\"facts\":[{\"factKey\":\"a\xffb\",\"observedAt\":\"x\"}]}", "facts[0].factKey", true},
		{"{\"facts\":[{\"observedAt\":\"x\"},{\"factKey\":\"a\xffb\"}]}", "facts[1].factKey", true},
		{"{\"a\":[1,{\"b\":2},[3],\"\xff\"]}", "a[3]", true},
		{"{\"x\":{\"y\":1},\"z\":\"\xfe\"}", "z", true},
		{"{\"ba\xffsis\":1}", "ba\ufffdsis", true},
		{`{"k":"a\ud800b"}`, "k", true},
		{`{"k":"\ud83d\ude00"}`, "", false},
		{`{"k":"\\ud800"}`, "", false}, // an escaped backslash, then text
		{`{"k":"\udc00"}`, "k", true},
		{`{"k":"\ud800\u0041"}`, "k", true},
		{"\"\xff\"", "", true},
		{"{\"a\":\"\xff", "", false}, // malformed: the decoder reports it
		{"{\"msg\":{\"metadata\":{\"https://x/y\":{\"facts\":[{\"factKey\":\"\xc0\"}]}}}}", "msg.metadata.https://x/y.facts[0].factKey", true},
	} {
		got, bad := InvalidString([]byte(c.in))
		if bad != c.bad || got != c.want {
			t.Errorf("%q: got %q %v, want %q %v", c.in, got, bad, c.want, c.bad)
		}
	}
}

func TestCaseVariantKey(t *testing.T) {
	for _, c := range []struct {
		in, path, other string
		found           bool
	}{
		{`{"url":"a","name":"b"}`, "", "", false},
		{`{"url":"a","URL":"b"}`, "URL", "url", true},
		{`{"url":"a","url":"b"}`, "url", "url", true},
		{`{"a":{"url":1},"b":{"url":2}}`, "", "", false}, // different objects
		{`{"supportedInterfaces":[{"url":"a"},{"url":"b","Url":"c"}]}`, "supportedInterfaces[1].Url", "url", true},
		{`[{"x":1,"y":{"Z":1,"z":2}}]`, "[0].y.z", "Z", true},
		{`{"a":"x","A"`, "A", "a", true},
	} {
		path, other, found := CaseVariantKey([]byte(c.in))
		if found != c.found || path != c.path || other != c.other {
			t.Errorf("%s: got %q %q %v, want %q %q %v", c.in, path, other, found, c.path, c.other, c.found)
		}
	}
}

// TestPathAt finds the path encoding/json's type errors point at, by
// decoding into a Go value (with an embedded struct, whose name the
// error's Field carries) and asking for the path at the error's offset.
func TestPathAt(t *testing.T) {
	type inner struct {
		Withdraw []string `json:"withdraw"`
	}
	type args struct {
		AgentID string `json:"agentId"`
		inner
		Facts []struct {
			ObservedAt int `json:"observedAt"`
		} `json:"facts"`
		Nested struct {
			Deep struct {
				N int `json:"n"`
			} `json:"deep"`
		} `json:"nested"`
	}
	for in, want := range map[string]string{
		`{"agentId":"a","withdraw":"all"}`:                        "withdraw",
		`{"facts":[{"observedAt":1},{"observedAt":"yesterday"}]}`: "facts[1].observedAt",
		`{"nested":{"deep":{"n":{"x":1}}}}`:                       "nested.deep.n",
		`{"agentId":7}`:                                           "agentId",
		`{"withdraw":["a",{"b":1}]}`:                              "withdraw[1]",
		`{"facts":{"observedAt":1}}`:                              "facts",
	} {
		var v args
		err := json.Unmarshal([]byte(in), &v)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Fatalf("%s: %v", in, err)
		}
		if got, ok := PathAt([]byte(in), te.Offset); !ok || got != want {
			t.Errorf("%s: PathAt %q %v (Field %q), want %q", in, got, ok, te.Field, want)
		}
	}
}

func FuzzWalk(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"\ud800"}],"A":"\xff"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		InvalidString(b)
		CaseVariantKey(b)
		PathAt(b, int64(len(b)/2))
	})
}

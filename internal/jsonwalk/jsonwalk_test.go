package jsonwalk

import "testing"

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

func FuzzWalk(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"\ud800"}],"A":"\xff"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		InvalidString(b)
		CaseVariantKey(b)
	})
}

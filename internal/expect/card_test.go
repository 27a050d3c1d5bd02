package expect

import (
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
)

// cardV1Fixture returns a valid A2A 1.0 card as a JSON tree.
func cardV1Fixture() map[string]any {
	return map[string]any{
		"name":               "Billing agent",
		"description":        "Chases invoices",
		"version":            "1.2.0",
		"defaultInputModes":  []any{"text/plain"},
		"defaultOutputModes": []any{"text/plain"},
		"supportedInterfaces": []any{
			map[string]any{"url": "https://agent.example.com/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
			map[string]any{"url": "https://agent.example.com/a2a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
			map[string]any{"url": "https://agent.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
		},
		"capabilities": map[string]any{
			"streaming": true,
			"extensions": []any{
				map[string]any{"uri": "https://example.com/other-extension", "params": map[string]any{"x": 1}},
				map[string]any{
					"uri":         URI,
					"description": "Raises expectations on invoices and orders",
					"params": map[string]any{
						"keepsTime":  false,
						"lapseSkill": "handle-lapse",
						"kinds": []any{
							map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "The customer pays the invoice", "basis": "contract"},
							map[string]any{"kind": "shipment", "subjectType": "order", "describes": "The warehouse ships the order", "basis": "observed", "skills": []any{"fulfil"}},
						},
					},
				},
			},
		},
		"skills": []any{
			map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation", "tags": []any{"lapse"}},
			map[string]any{"id": "fulfil", "name": "Fulfil", "description": "Fulfils orders", "tags": []any{"orders"}},
		},
	}
}

// cardV03Fixture returns a valid A2A 0.3 card as a JSON tree.
func cardV03Fixture() map[string]any {
	c := cardV1Fixture()
	delete(c, "supportedInterfaces")
	c["protocolVersion"] = "0.3.0"
	c["url"] = "http://agent.example.com:8080/rpc"
	c["preferredTransport"] = "JSONRPC"
	c["additionalInterfaces"] = []any{
		map[string]any{"url": "http://agent.example.com:8080/rpc", "transport": "JSONRPC"},
		map[string]any{"url": "http://agent.example.com:8080/rest", "transport": "HTTP+JSON"},
	}
	return c
}

func cardJSON(t *testing.T, tree map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cardParams returns the declaration params of a fixture.
func cardParams(c map[string]any) map[string]any {
	exts := c["capabilities"].(map[string]any)["extensions"].([]any)
	return exts[1].(map[string]any)["params"].(map[string]any)
}

func cardKinds(c map[string]any) []any { return cardParams(c)["kinds"].([]any) }

func cardKindAt(c map[string]any, i int) map[string]any { return cardKinds(c)[i].(map[string]any) }

func TestParseCardV1(t *testing.T) {
	raw := cardJSON(t, cardV1Fixture())
	card, err := ParseCard("agent-1", raw)
	if err != nil {
		t.Fatalf("ParseCard: %v", err)
	}
	if card.AgentID != "agent-1" || card.ProtocolVersion != "1.0" || card.URL != "https://agent.example.com/a2a" {
		t.Fatalf("card = %+v", card)
	}
	if string(card.Raw) != string(raw) {
		t.Fatal("Raw is not the card as submitted")
	}
	raw[0] = ' ' // Raw is a copy
	if card.Raw[0] != '{' {
		t.Fatal("Raw aliases the input")
	}
	if !reflect.DeepEqual(card.Skills, []string{"handle-lapse", "fulfil"}) {
		t.Fatalf("skills = %v", card.Skills)
	}
	want := Declaration{
		KeepsTime:  false,
		LapseSkill: "handle-lapse",
		Kinds: []Kind{
			{Kind: "payment", SubjectType: "invoice", Describes: "The customer pays the invoice", Basis: "contract"},
			{Kind: "shipment", SubjectType: "order", Describes: "The warehouse ships the order", Basis: "observed", Skills: []string{"fulfil"}},
		},
	}
	if !reflect.DeepEqual(card.Declaration, want) {
		t.Fatalf("declaration = %+v, want %+v", card.Declaration, want)
	}
	// The extension params beside the seed's are read.
	fx := cardV1Fixture()
	cardParams(fx)["heartbeats"], cardParams(fx)["lookback"] = true, true
	card, err = ParseCard("agent-1", cardJSON(t, fx))
	if err != nil || !card.Declaration.Heartbeats || !card.Declaration.Lookback {
		t.Fatalf("heartbeats and lookback params: %+v %v", card.Declaration, err)
	}
}

func TestParseCardV1OnlyV03Interface(t *testing.T) {
	c := cardV1Fixture()
	c["supportedInterfaces"] = []any{
		map[string]any{"url": "https://agent.example.com/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
	}
	card, err := ParseCard("a", cardJSON(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if card.ProtocolVersion != "0.3" || card.URL != "https://agent.example.com/old" {
		t.Fatalf("card = %+v", card)
	}
}

func TestParseCardV03(t *testing.T) {
	for name, mutate := range map[string]func(map[string]any){
		"preferred JSONRPC":         func(map[string]any) {},
		"preferredTransport absent": func(c map[string]any) { delete(c, "preferredTransport"); delete(c, "additionalInterfaces") },
		"protocolVersion 0.3":       func(c map[string]any) { c["protocolVersion"] = "0.3" },
	} {
		t.Run(name, func(t *testing.T) {
			c := cardV03Fixture()
			mutate(c)
			card, err := ParseCard("agent-2", cardJSON(t, c))
			if err != nil {
				t.Fatalf("ParseCard: %v", err)
			}
			if card.ProtocolVersion != "0.3" || card.URL != "http://agent.example.com:8080/rpc" {
				t.Fatalf("card = %+v", card)
			}
			if card.Declaration.LapseSkill != "handle-lapse" || len(card.Declaration.Kinds) != 2 {
				t.Fatalf("declaration = %+v", card.Declaration)
			}
		})
	}

	c := cardV03Fixture()
	c["preferredTransport"] = "HTTP+JSON"
	c["url"] = "http://agent.example.com:8080/rest"
	c["additionalInterfaces"] = []any{
		map[string]any{"url": "http://agent.example.com:8080/rest", "transport": "HTTP+JSON"},
		map[string]any{"url": "http://agent.example.com:8080/jsonrpc", "transport": "JSONRPC"},
	}
	card, err := ParseCard("a", cardJSON(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != "http://agent.example.com:8080/jsonrpc" || card.ProtocolVersion != "0.3" {
		t.Fatalf("additional interface: card = %+v", card)
	}
}

const cardExtPath = "capabilities.extensions[1].params"

func TestParseCardErrors(t *testing.T) {
	tests := []struct {
		name   string
		v03    bool
		mutate func(c map[string]any)
		raw    string // used instead of the fixture when set
		paths  []string
	}{
		{name: "not JSON", raw: `{`, paths: []string{""}},
		{name: "not an object", raw: `[1,2]`, paths: []string{""}},
		{name: "null", raw: `null`, paths: []string{""}},
		{name: "skills wrong type", mutate: func(c map[string]any) { c["skills"] = "nope" }, paths: []string{"skills"}},
		{name: "no extension", mutate: func(c map[string]any) {
			c["capabilities"].(map[string]any)["extensions"] = []any{}
		}, paths: []string{"capabilities.extensions"}},
		{name: "extension declared twice", mutate: func(c map[string]any) {
			caps := c["capabilities"].(map[string]any)
			exts := caps["extensions"].([]any)
			caps["extensions"] = append(exts, map[string]any{"uri": URI, "params": map[string]any{}})
		}, paths: []string{"capabilities.extensions[2].uri"}},
		{name: "params missing", mutate: func(c map[string]any) {
			delete(c["capabilities"].(map[string]any)["extensions"].([]any)[1].(map[string]any), "params")
		}, paths: []string{cardExtPath}},
		{name: "keepsTime missing", mutate: func(c map[string]any) { delete(cardParams(c), "keepsTime") }, paths: []string{cardExtPath + ".keepsTime"}},
		{name: "keepsTime null", mutate: func(c map[string]any) { cardParams(c)["keepsTime"] = nil }, paths: []string{cardExtPath + ".keepsTime"}},
		{name: "keepsTime not boolean", mutate: func(c map[string]any) { cardParams(c)["keepsTime"] = "yes" }, paths: []string{cardExtPath + ".keepsTime"}},
		{name: "heartbeats not boolean", mutate: func(c map[string]any) { cardParams(c)["heartbeats"] = "yes" }, paths: []string{cardExtPath + ".heartbeats"}},
		{name: "lookback not boolean", mutate: func(c map[string]any) { cardParams(c)["lookback"] = 1 }, paths: []string{cardExtPath + ".lookback"}},
		{name: "lapseSkill missing", mutate: func(c map[string]any) { delete(cardParams(c), "lapseSkill") }, paths: []string{cardExtPath + ".lapseSkill"}},
		{name: "lapseSkill blank", mutate: func(c map[string]any) { cardParams(c)["lapseSkill"] = "  " }, paths: []string{cardExtPath + ".lapseSkill"}},
		{name: "lapseSkill not a string", mutate: func(c map[string]any) { cardParams(c)["lapseSkill"] = 7 }, paths: []string{cardExtPath + ".lapseSkill"}},
		{name: "lapseSkill unknown", mutate: func(c map[string]any) { cardParams(c)["lapseSkill"] = "handle-lapses" }, paths: []string{cardExtPath + ".lapseSkill"}},
		{name: "kinds missing", mutate: func(c map[string]any) { delete(cardParams(c), "kinds") }, paths: []string{cardExtPath + ".kinds"}},
		{name: "kinds not array", mutate: func(c map[string]any) { cardParams(c)["kinds"] = map[string]any{} }, paths: []string{cardExtPath + ".kinds"}},
		{name: "kind not object", mutate: func(c map[string]any) { cardParams(c)["kinds"] = []any{"payment"} }, paths: []string{cardExtPath + ".kinds[0]"}},
		{name: "kind missing", mutate: func(c map[string]any) { delete(cardKindAt(c, 1), "kind") }, paths: []string{cardExtPath + ".kinds[1].kind"}},
		{name: "kind duplicate", mutate: func(c map[string]any) { cardKindAt(c, 1)["kind"] = "payment" }, paths: []string{cardExtPath + ".kinds[1].kind"}},
		{name: "subjectType missing", mutate: func(c map[string]any) { delete(cardKindAt(c, 0), "subjectType") }, paths: []string{cardExtPath + ".kinds[0].subjectType"}},
		{name: "subjectType empty", mutate: func(c map[string]any) { cardKindAt(c, 0)["subjectType"] = "" }, paths: []string{cardExtPath + ".kinds[0].subjectType"}},
		{name: "describes missing", mutate: func(c map[string]any) { delete(cardKindAt(c, 1), "describes") }, paths: []string{cardExtPath + ".kinds[1].describes"}},
		{name: "describes TODO", mutate: func(c map[string]any) { cardKindAt(c, 1)["describes"] = " todo " }, paths: []string{cardExtPath + ".kinds[1].describes"}},
		{name: "describes angle brackets", mutate: func(c map[string]any) { cardKindAt(c, 0)["describes"] = "<what is expected>" }, paths: []string{cardExtPath + ".kinds[0].describes"}},
		{name: "describes not a string", mutate: func(c map[string]any) { cardKindAt(c, 0)["describes"] = []any{} }, paths: []string{cardExtPath + ".kinds[0].describes"}},
		{name: "basis missing", mutate: func(c map[string]any) { delete(cardKindAt(c, 1), "basis") }, paths: []string{cardExtPath + ".kinds[1].basis"}},
		{name: "basis empty", mutate: func(c map[string]any) { cardKindAt(c, 1)["basis"] = "" }, paths: []string{cardExtPath + ".kinds[1].basis"}},
		{name: "kind skills not array", mutate: func(c map[string]any) { cardKindAt(c, 1)["skills"] = "fulfil" }, paths: []string{cardExtPath + ".kinds[1].skills"}},
		{name: "kind skill unknown", mutate: func(c map[string]any) { cardKindAt(c, 1)["skills"] = []any{"fulfil", "ship"} }, paths: []string{cardExtPath + ".kinds[1].skills[1]"}},
		{name: "kind skill not string", mutate: func(c map[string]any) { cardKindAt(c, 1)["skills"] = []any{3} }, paths: []string{cardExtPath + ".kinds[1].skills[0]"}},
		{name: "several errors at once", mutate: func(c map[string]any) {
			delete(cardParams(c), "keepsTime")
			cardKindAt(c, 0)["describes"] = "TBD"
			cardKindAt(c, 1)["basis"] = " "
		}, paths: []string{cardExtPath + ".keepsTime", cardExtPath + ".kinds[0].describes", cardExtPath + ".kinds[1].basis"}},
		{name: "v1 no JSONRPC interface", mutate: func(c map[string]any) {
			c["supportedInterfaces"] = []any{map[string]any{"url": "https://a.example/g", "protocolBinding": "GRPC", "protocolVersion": "1.0"}}
		}, paths: []string{"supportedInterfaces"}},
		{name: "v1 unsupported version", mutate: func(c map[string]any) {
			c["supportedInterfaces"] = []any{map[string]any{"url": "https://a.example/r", "protocolBinding": "JSONRPC", "protocolVersion": "0.2"}}
		}, paths: []string{"supportedInterfaces"}},
		{name: "v1 relative url", mutate: func(c map[string]any) {
			c["supportedInterfaces"].([]any)[2].(map[string]any)["url"] = "/a2a"
		}, paths: []string{"supportedInterfaces[2].url"}},
		{name: "v1 ftp url", mutate: func(c map[string]any) {
			c["supportedInterfaces"].([]any)[2].(map[string]any)["url"] = "ftp://agent.example.com/a2a"
		}, paths: []string{"supportedInterfaces[2].url"}},
		{name: "v1 empty url", mutate: func(c map[string]any) {
			c["supportedInterfaces"].([]any)[2].(map[string]any)["url"] = ""
		}, paths: []string{"supportedInterfaces[2].url"}},
		{name: "v03 no url", v03: true, mutate: func(c map[string]any) {
			delete(c, "url")
			delete(c, "additionalInterfaces")
		}, paths: []string{"url"}},
		{name: "v03 opaque url", v03: true, mutate: func(c map[string]any) { c["url"] = "http:agent" }, paths: []string{"url"}},
		{name: "v03 url without host", v03: true, mutate: func(c map[string]any) { c["url"] = "https:///rpc" }, paths: []string{"url"}},
		{name: "v03 not JSONRPC", v03: true, mutate: func(c map[string]any) {
			c["preferredTransport"] = "GRPC"
			c["additionalInterfaces"] = []any{}
		}, paths: []string{"preferredTransport"}},
		{name: "v03 additional interface bad url", v03: true, mutate: func(c map[string]any) {
			c["preferredTransport"] = "GRPC"
			c["additionalInterfaces"] = []any{map[string]any{"url": "grpc://x", "transport": "JSONRPC"}}
		}, paths: []string{"additionalInterfaces[0].url"}},
		{name: "v03 version 0.2", v03: true, mutate: func(c map[string]any) { c["protocolVersion"] = "0.2.5" }, paths: []string{"protocolVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw []byte
			if tt.raw != "" {
				raw = []byte(tt.raw)
			} else {
				c := cardV1Fixture()
				if tt.v03 {
					c = cardV03Fixture()
				}
				tt.mutate(c)
				raw = cardJSON(t, c)
			}
			card, err := ParseCard("a", raw)
			if err == nil {
				t.Fatalf("ParseCard accepted the card: %+v", card)
			}
			t.Log(err)
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid {
				t.Fatalf("error %v is not an Invalid *errs.Error", err)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Path)
				if f.Message == "" {
					t.Errorf("field %q has no message", f.Path)
				}
			}
			if !reflect.DeepEqual(got, tt.paths) {
				t.Fatalf("paths = %q, want %q (error: %v)", got, tt.paths, err)
			}
			if !reflect.DeepEqual(card, Card{}) {
				t.Fatalf("a failing parse returned a card: %+v", card)
			}
		})
	}
}

func TestCardPlaceholder(t *testing.T) {
	placeholders := []string{
		"", " ", "\t\n", "TODO", "todo", "ToDo: write this", "TODO - describe", "TBD", "tbd.", "...", "…", " … ",
		"placeholder", "Placeholder text", "lorem ipsum", "Lorem ipsum dolor sit amet", "lorem ipsum…",
		"n/a", "N/A", "NA", "none", "None.", "-", "--", "?", "<...>", "<describe the expectation>", "<>",
		"xxx", "XXXX", "{{describes}}", "string", "FIXME",
	}
	for _, s := range placeholders {
		if !cardIsPlaceholder(s) {
			t.Errorf("cardIsPlaceholder(%q) = false, want true", s)
		}
	}
	meaningful := []string{
		"The customer pays the invoice", "Todos los pagos llegan a tiempo", "Today's order ships",
		"Nacho delivers", "Xavier signs the contract", "n/a items are restocked within a week",
		"Payment < 100 EUR arrives", "placeholders are replaced by the printer", "tbdx",
	}
	for _, s := range meaningful {
		if cardIsPlaceholder(s) {
			t.Errorf("cardIsPlaceholder(%q) = true, want false", s)
		}
	}
}

func TestCardKind(t *testing.T) {
	card, err := ParseCard("a", cardJSON(t, cardV1Fixture()))
	if err != nil {
		t.Fatal(err)
	}
	k, ok := card.Kind("shipment")
	if !ok || k.SubjectType != "order" || !reflect.DeepEqual(k.Skills, []string{"fulfil"}) {
		t.Fatalf("Kind(shipment) = %+v, %v", k, ok)
	}
	if _, ok := card.Kind("refund"); ok {
		t.Fatal("Kind(refund) found")
	}
	if _, ok := (Card{}).Kind(""); ok {
		t.Fatal("zero card has a kind")
	}
}

// TestParseCardNoPanic feeds truncated and byte-flipped cards to ParseCard.
func TestParseCardNoPanic(t *testing.T) {
	seeds := [][]byte{cardJSON(t, cardV1Fixture()), cardJSON(t, cardV03Fixture())}
	rng := rand.New(rand.NewSource(1))
	odd := []string{`{"capabilities":null}`, `{"capabilities":{"extensions":[null]}}`,
		`{"capabilities":{"extensions":[{"uri":"` + URI + `","params":null}]}}`,
		`{"capabilities":{"extensions":[{"uri":"` + URI + `","params":{"kinds":[null,1,"x",{}]}}]}}`,
		`{"supportedInterfaces":[null]}`, `{"supportedInterfaces":[{}]}`, `{"securitySchemes":{"x":{"type":"weird"}}}`,
		`{"url":5}`, `"string"`, `1`, ``, `{"skills":[null]}`}
	for _, s := range odd {
		if _, err := ParseCard("a", []byte(s)); err == nil {
			t.Errorf("ParseCard(%s) accepted", s)
		}
	}
	for i := 0; i < 3000; i++ {
		seed := seeds[i%2]
		b := append([]byte(nil), seed...)
		switch rng.Intn(3) {
		case 0:
			b = b[:rng.Intn(len(b))]
		case 1:
			for n := 0; n < 1+rng.Intn(4); n++ {
				b[rng.Intn(len(b))] = byte(rng.Intn(256))
			}
		case 2:
			s := string(b)
			s = strings.Replace(s, `"`, `'`, 1+rng.Intn(3))
			b = []byte(s)
		}
		_, _ = ParseCard("a", b)
	}
}

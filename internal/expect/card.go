package expect

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/jsonwalk"
)

// Protocol versions a Card can carry.
const (
	ProtocolV1  = "1.0"
	ProtocolV03 = "0.3"
)

// ParseCard parses and validates an A2A agent card submitted for agentID. It
// accepts A2A 1.0 cards (supportedInterfaces[] with url, protocolBinding and
// protocolVersion) and 0.3 cards (top-level url, protocolVersion "0.3.x",
// preferredTransport and additionalInterfaces[]); both are read with the A2A
// SDK's 0.3-compatible card parser.
//
// The card must declare the expectations extension (capabilities.extensions[]
// with uri == URI) with valid params: keepsTime (boolean), lapseSkill (naming
// a skill on the card) and kinds (unique kind, each with kind, subjectType,
// a describes that is not a placeholder, basis, and skills naming skills on
// the card), and it must offer a JSON-RPC interface of protocol 1.0 or 0.3
// at an absolute http or https URL. A 1.0 interface is preferred over a 0.3
// one; among equals the first listed wins.
//
// Security schemes and requirements are read in either version's shape
// (see cardSecurity): a scheme of unknown type, an API key without a valid
// location or name, a token or discovery URL that is not absolute, or a
// requirement naming an undeclared scheme is refused like any other field.
//
// On success it returns the Card with Raw set to a copy of raw. Otherwise it
// returns an *errs.Error with Code errs.Invalid whose Fields name every
// failing field by its JSON path, for example
// "capabilities.extensions[0].params.kinds[1].describes" (the path "" stands
// for the card as a whole). It does no I/O and never panics.
func ParseCard(agentID string, raw []byte) (Card, error) {
	var c errs.Collector
	const msg = "invalid agent card"

	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		c.Add("", "the agent card must be a JSON object")
		return Card{}, c.Err(msg)
	}
	// Names are matched regardless of letter case by the decoder: a card
	// with both "url" and "URL" would be shown by one and used by the other.
	if path, other, found := jsonwalk.CaseVariantKey(raw); found {
		c.Add(path, "repeats %q but for letter case (field names must be unique regardless of case)", other)
		return Card{}, c.Err(msg)
	}

	// The fields read here (skills, capabilities.extensions and, for 1.0,
	// supportedInterfaces) have the same JSON shape in 0.3 and 1.0 cards,
	// so one decode into the SDK's 1.0 type serves both; the 0.3 layout of
	// interfaces is read by cardEndpointV03.
	sdkCard := &a2a.AgentCard{}
	err := json.Unmarshal(withoutSecurity(raw, top), sdkCard)
	if err != nil {
		path, why := "", "not a valid A2A agent card"
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			path = typeErr.Field
			why = "has the wrong JSON type"
			if typeErr.Type != nil {
				why = fmt.Sprintf("must be a JSON %s", cardJSONKind(typeErr.Type.Kind().String()))
			}
		} else if err != nil {
			why += ": " + err.Error()
		}
		c.Add(path, "%s", why)
		return Card{}, c.Err(msg)
	}

	skills := make([]string, 0, len(sdkCard.Skills))
	skillSet := make(map[string]bool, len(sdkCard.Skills))
	for _, s := range sdkCard.Skills {
		skills = append(skills, s.ID)
		skillSet[s.ID] = true
	}

	decl := cardDeclaration(&c, sdkCard, skills, skillSet)
	schemes, requirements := cardSecurity(&c, top)

	var version, endpoint string
	if cardIsV1(top) {
		version, endpoint = cardEndpointV1(&c, sdkCard)
	} else {
		version, endpoint = cardEndpointV03(&c, raw)
	}

	if err := c.Err(msg); err != nil {
		return Card{}, err
	}
	return Card{
		AgentID:         agentID,
		Raw:             json.RawMessage(append([]byte(nil), raw...)),
		Declaration:     decl,
		Skills:          skills,
		ProtocolVersion: version,
		URL:             endpoint,
		SecuritySchemes: schemes,
		Security:        requirements,
	}, nil
}

// Kind returns the kind declared on the card under name, and false when the
// card declares no such kind. It never fails.
func (c Card) Kind(name string) (Kind, bool) {
	for _, k := range c.Declaration.Kinds {
		if k.Kind == name {
			return k, true
		}
	}
	return Kind{}, false
}

// cardJSONKind names the JSON type that corresponds to a Go reflect kind.
func cardJSONKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr", "interface":
		return "object"
	case "float32", "float64", "int", "int8", "int16", "int32", "int64",
		"uint", "uint8", "uint16", "uint32", "uint64":
		return "number"
	}
	return "value of another type"
}

// cardIsV1 reports whether the card lists supportedInterfaces (A2A 1.0);
// otherwise it is read as a 0.3 card.
func cardIsV1(top map[string]json.RawMessage) bool {
	var list []json.RawMessage
	if err := json.Unmarshal(top["supportedInterfaces"], &list); err != nil {
		return false
	}
	return len(list) > 0
}

// cardDeclaration finds the extension's declaration and validates it.
func cardDeclaration(c *errs.Collector, card *a2a.AgentCard, skills []string, skillSet map[string]bool) Declaration {
	found := -1
	for i, ext := range card.Capabilities.Extensions {
		if ext.URI != URI {
			continue
		}
		if found >= 0 {
			c.Add(fmt.Sprintf("capabilities.extensions[%d].uri", i),
				"declares %s again (first at capabilities.extensions[%d])", URI, found)
			continue
		}
		found = i
	}
	if found < 0 {
		c.Add("capabilities.extensions", "the card must declare the extension %s", URI)
		return Declaration{}
	}

	base := fmt.Sprintf("capabilities.extensions[%d].params", found)
	params := card.Capabilities.Extensions[found].Params
	if params == nil {
		c.Add(base, "required: keepsTime, lapseSkill and kinds")
		return Declaration{}
	}
	// Params went through map[string]any; re-encoding it cannot fail.
	b, err := json.Marshal(params)
	if err != nil {
		c.Add(base, "must be a JSON object")
		return Declaration{}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		c.Add(base, "must be a JSON object")
		return Declaration{}
	}

	var d Declaration
	if rawKeeps, ok := cardField(fields, "keepsTime"); !ok {
		c.Add(base+".keepsTime", "required")
	} else if err := json.Unmarshal(rawKeeps, &d.KeepsTime); err != nil {
		c.Add(base+".keepsTime", "must be a boolean")
	}

	// Extension params beside the seed's: whether the agent uses
	// heartbeats and lookback (informational; absent means false).
	for _, opt := range []struct {
		name string
		dst  *bool
	}{{"heartbeats", &d.Heartbeats}, {"lookback", &d.Lookback}} {
		if raw, ok := cardField(fields, opt.name); ok {
			if err := json.Unmarshal(raw, opt.dst); err != nil {
				c.Add(base+"."+opt.name, "must be a boolean")
			}
		}
	}

	if s, ok := cardString(c, fields, base, "lapseSkill"); ok {
		d.LapseSkill = s
		if !skillSet[s] {
			c.Add(base+".lapseSkill", "must name a skill on the card (skills: %s)", cardSkillList(skills))
		}
	}

	rawKinds, ok := cardField(fields, "kinds")
	if !ok {
		c.Add(base+".kinds", "required")
		return d
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rawKinds, &items); err != nil {
		c.Add(base+".kinds", "must be an array")
		return d
	}
	d.Kinds = make([]Kind, 0, len(items))
	firstAt := map[string]int{}
	for j, item := range items {
		path := fmt.Sprintf("%s.kinds[%d]", base, j)
		var kf map[string]json.RawMessage
		if err := json.Unmarshal(item, &kf); err != nil || kf == nil {
			c.Add(path, "must be an object")
			continue
		}
		var k Kind
		if s, ok := cardString(c, kf, path, "kind"); ok {
			k.Kind = s
			if prev, dup := firstAt[s]; dup {
				c.Add(path+".kind", "duplicates %s.kinds[%d].kind %q: kinds must be unique", base, prev, s)
			} else {
				firstAt[s] = j
			}
		}
		if s, ok := cardString(c, kf, path, "subjectType"); ok {
			k.SubjectType = s
		}
		if rawDesc, ok := cardField(kf, "describes"); !ok {
			c.Add(path+".describes", "required")
		} else if err := json.Unmarshal(rawDesc, &k.Describes); err != nil {
			c.Add(path+".describes", "must be a string")
		} else if cardIsPlaceholder(k.Describes) {
			c.Add(path+".describes", "must say what is expected in a person's words, not a placeholder (%q)", k.Describes)
		}
		if s, ok := cardString(c, kf, path, "basis"); ok {
			k.Basis = s
		}
		if rawSkills, ok := cardField(kf, "skills"); ok {
			var ks []json.RawMessage
			if err := json.Unmarshal(rawSkills, &ks); err != nil {
				c.Add(path+".skills", "must be an array of skill ids")
			} else {
				for n, rs := range ks {
					var id string
					if err := json.Unmarshal(rs, &id); err != nil {
						c.Add(fmt.Sprintf("%s.skills[%d]", path, n), "must be a string")
						continue
					}
					if !skillSet[id] {
						c.Add(fmt.Sprintf("%s.skills[%d]", path, n), "must name a skill on the card (skills: %s)", cardSkillList(skills))
					}
					k.Skills = append(k.Skills, id)
				}
			}
		}
		d.Kinds = append(d.Kinds, k)
	}
	return d
}

// cardField returns the raw value of key, treating JSON null as absent.
func cardField(fields map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := fields[key]
	if !ok || strings.TrimSpace(string(v)) == "null" {
		return nil, false
	}
	return v, true
}

// cardString reads a required, non-blank string field.
func cardString(c *errs.Collector, fields map[string]json.RawMessage, base, key string) (string, bool) {
	path := base + "." + key
	v, ok := cardField(fields, key)
	if !ok {
		c.Add(path, "required")
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		c.Add(path, "must be a string")
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		c.Add(path, "must not be empty")
		return "", false
	}
	return s, true
}

func cardSkillList(skills []string) string {
	if len(skills) == 0 {
		return "none"
	}
	quoted := make([]string, len(skills))
	for i, s := range skills {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

// cardVersion maps a declared protocol version to ProtocolV1 or
// ProtocolV03, or "" when the SDK cannot speak it.
func cardVersion(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	switch {
	case v == "1" || strings.HasPrefix(v, "1."):
		return ProtocolV1
	case v == "0.3" || strings.HasPrefix(v, "0.3."):
		return ProtocolV03
	}
	return ""
}

// cardEndpointV1 picks the JSON-RPC interface of a 1.0 card.
func cardEndpointV1(c *errs.Collector, card *a2a.AgentCard) (version, endpoint string) {
	best := -1
	for i, iface := range card.SupportedInterfaces {
		if iface == nil || !strings.EqualFold(string(iface.ProtocolBinding), string(a2a.TransportProtocolJSONRPC)) {
			continue
		}
		v := cardVersion(string(iface.ProtocolVersion))
		if v == "" {
			continue
		}
		if best < 0 || (v == ProtocolV1 && version != ProtocolV1) {
			best, version = i, v
		}
	}
	if best < 0 {
		c.Add("supportedInterfaces", "must list a JSONRPC interface with protocolVersion 1.0 or 0.3")
		return "", ""
	}
	endpoint = card.SupportedInterfaces[best].URL
	if why := cardCheckURL(endpoint); why != "" {
		c.Add(fmt.Sprintf("supportedInterfaces[%d].url", best), "%s", why)
		return "", ""
	}
	return version, endpoint
}

// cardV03 is the part of a 0.3 card that locates its interfaces.
type cardV03 struct {
	URL                  string `json:"url"`
	ProtocolVersion      string `json:"protocolVersion"`
	PreferredTransport   string `json:"preferredTransport"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
}

// cardEndpointV03 picks the JSON-RPC interface of a 0.3 card. An absent
// preferredTransport means JSONRPC, as in the 0.3 specification.
func cardEndpointV03(c *errs.Collector, raw []byte) (version, endpoint string) {
	var card cardV03
	if err := json.Unmarshal(raw, &card); err != nil {
		c.Add("", "not a valid A2A 0.3 agent card")
		return "", ""
	}
	if strings.TrimSpace(card.ProtocolVersion) != "" && cardVersion(card.ProtocolVersion) != ProtocolV03 {
		c.Add("protocolVersion", "A2A protocol version %q is not supported: use 1.0 (supportedInterfaces) or 0.3", card.ProtocolVersion)
		return "", ""
	}
	path := ""
	switch {
	case card.URL != "" && (card.PreferredTransport == "" || strings.EqualFold(card.PreferredTransport, string(a2a.TransportProtocolJSONRPC))):
		path, endpoint = "url", card.URL
	default:
		for i, ai := range card.AdditionalInterfaces {
			if strings.EqualFold(ai.Transport, string(a2a.TransportProtocolJSONRPC)) {
				path, endpoint = fmt.Sprintf("additionalInterfaces[%d].url", i), ai.URL
				break
			}
		}
	}
	if path == "" {
		if card.URL == "" {
			c.Add("url", "required: the agent's JSON-RPC endpoint")
		} else {
			c.Add("preferredTransport", "the card must offer a JSONRPC interface (preferredTransport or additionalInterfaces[])")
		}
		return "", ""
	}
	if why := cardCheckURL(endpoint); why != "" {
		c.Add(path, "%s", why)
		return "", ""
	}
	return ProtocolV03, endpoint
}

// cardCheckURL returns why s is not an absolute http or https URL, or "".
func cardCheckURL(s string) string {
	const want = "must be an absolute http or https URL"
	if strings.TrimSpace(s) == "" {
		return "required: " + want
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.Opaque != "" {
		return want
	}
	return ""
}

// cardPlaceholderWords are texts (lower case, trimmed, trailing punctuation
// removed) that say nothing.
var cardPlaceholderWords = map[string]bool{
	"todo": true, "tbd": true, "tba": true, "fixme": true, "placeholder": true,
	"n/a": true, "na": true, "none": true, "null": true, "nil": true,
	"undefined": true, "lorem ipsum": true, "string": true, "description": true,
	"describe": true, "changeme": true, "change me": true, "xxx": true,
	"example": true, "test": true, "...": true, "…": true, "-": true,
}

// cardPlaceholderPrefixes start a text that is a placeholder when followed by
// the end or a non-letter ("TODO: fill in", "lorem ipsum dolor").
var cardPlaceholderPrefixes = []string{"todo", "tbd", "fixme", "placeholder", "lorem ipsum"}

// cardIsPlaceholder reports whether s says nothing: empty or blank, a known
// placeholder word ("TODO", "TBD", "...", "placeholder", "lorem ipsum...",
// "n/a", "none", "-", "xxx", ...), text wholly in angle brackets ("<...>",
// "<describe>") or double braces, only punctuation, or only x's. Matching is
// case-insensitive on the trimmed text.
func cardIsPlaceholder(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return true
	}
	if strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">") {
		return true
	}
	if strings.HasPrefix(t, "{{") && strings.HasSuffix(t, "}}") {
		return true
	}
	if cardPlaceholderWords[t] || cardPlaceholderWords[strings.TrimRight(t, ".:!?;, ")] {
		return true
	}
	hasLetterOrDigit, onlyX := false, true
	for _, r := range t {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			hasLetterOrDigit = true
		}
		if r != 'x' {
			onlyX = false
		}
	}
	if !hasLetterOrDigit || (onlyX && len(t) >= 2) {
		return true
	}
	for _, p := range cardPlaceholderPrefixes {
		if rest, ok := strings.CutPrefix(t, p); ok {
			r := []rune(rest)
			if len(r) == 0 || !unicode.IsLetter(r[0]) {
				return true
			}
		}
	}
	return false
}

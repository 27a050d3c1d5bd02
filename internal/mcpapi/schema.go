package mcpapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentclock/clockwork/internal/httpapi"
)

// InputSchema returns the JSON schema of t's arguments: inferred from the Go
// type its route decodes them into (jsonschema-go, as the SDK infers
// schemas: structs allow no other members, members without omitempty are
// required), except for the parts the service validates itself and keeps
// as sent, whose schema is the OpenAPI document's component (t.Components),
// with the components it refers to under $defs. So the tool's schema says
// what its route's does, without a second copy of either.
func InputSchema(t httpapi.Tool) (*jsonschema.Schema, error) {
	defs := map[string]*jsonschema.Schema{}
	if name, ok := t.Components[""]; ok {
		s, err := component(name, defs)
		if err != nil {
			return nil, err
		}
		s.Defs = defs
		if s.Type != "object" {
			return nil, fmt.Errorf("component %s is not an object schema", name)
		}
		return s, nil
	}
	s, err := jsonschema.ForType(t.Input, nil)
	if err != nil {
		return nil, err
	}
	for prop, name := range t.Components {
		if _, ok := s.Properties[prop]; !ok {
			return nil, fmt.Errorf("%s has no property %q", t.Input, prop)
		}
		if _, err := component(name, defs); err != nil {
			return nil, err
		}
		s.Properties[prop] = &jsonschema.Schema{Ref: "#/$defs/" + name}
	}
	if len(defs) > 0 {
		s.Defs = defs
	}
	return s, nil
}

const componentRef = "#/components/schemas/"

// component returns the OpenAPI component schema name with its references
// turned to #/$defs/..., and adds every component it refers to (and name
// itself) to defs.
func component(name string, defs map[string]*jsonschema.Schema) (*jsonschema.Schema, error) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	var add func(name string) (*jsonschema.Schema, error)
	add = func(name string) (*jsonschema.Schema, error) {
		raw, ok := doc.Components.Schemas[name]
		if !ok {
			return nil, fmt.Errorf("openapi.json has no component schema %q", name)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		var refs []string
		v = rewriteRefs(v, &refs)
		b, _ := json.Marshal(v) // decoded JSON always encodes
		s := new(jsonschema.Schema)
		if err := json.Unmarshal(b, s); err != nil {
			return nil, fmt.Errorf("component %s: %w", name, err)
		}
		defs[name] = s
		for _, r := range refs {
			if _, done := defs[r]; !done {
				if _, err := add(r); err != nil {
					return nil, err
				}
			}
		}
		return s, nil
	}
	s, err := add(name)
	if err != nil {
		return nil, err
	}
	return s.CloneSchemas(), nil
}

// rewriteRefs points the OpenAPI component references in v at $defs and
// collects the names they refer to.
func rewriteRefs(v any, refs *[]string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if r, ok := c.(string); ok && k == "$ref" && strings.HasPrefix(r, componentRef) {
				name := strings.TrimPrefix(r, componentRef)
				*refs = append(*refs, name)
				x[k] = "#/$defs/" + name
				continue
			}
			x[k] = rewriteRefs(c, refs)
		}
	case []any:
		for i, c := range x {
			x[i] = rewriteRefs(c, refs)
		}
	}
	return v
}

package registry

import "strings"

// resolve returns the shape of the subschema a local reference names: the root ("#")
// or a member of the root's $defs or definitions, named plainly (no percent-encoding).
// Each is built once, so a recursive schema's shape is a finite graph with a cycle,
// walked no deeper than the document (the compiler refuses a reference cycle that
// does not descend into a property or an item). nil: not such a reference, or its
// subschema has no shape.
func (b *shapeBuilder) resolve(v any) *shape {
	ref, ok := v.(string)
	if !ok {
		return nil
	}
	if s, ok := b.named[ref]; ok {
		return s
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	group, name, ok := strings.Cut(rest, "/")
	if !ok || (group != "$defs" && group != "definitions") || strings.ContainsAny(name, "/%") {
		return nil
	}
	defs, _ := b.root[group].(map[string]any)
	target, ok := defs[pointerUnescaper.Replace(name)]
	if !ok {
		return nil
	}
	s := &shape{}
	b.named[ref] = s
	if !b.fill(s, target, false) {
		return nil
	}
	return s
}

// identifiers are the keywords that give a subschema a name other than its place in
// the root document (a base URI, an anchor) or resolve one dynamically: with any of
// them, "#/$defs/x" may not mean the root's member x, so the schema gets no shape.
// (Draft-04's "id" has no shape anyway.)
var identifiers = map[string]bool{
	"$id": true, "$anchor": true, "$dynamicAnchor": true, "$recursiveAnchor": true,
	"$dynamicRef": true, "$recursiveRef": true,
}

// namedSchemas are the keywords whose value maps names (of properties, of
// definitions) to subschemas: its keys are not keywords.
var namedSchemas = map[string]bool{
	"properties": true, "patternProperties": true, "$defs": true, "definitions": true,
	"dependentSchemas": true, "dependencies": true,
}

// hasIdentifiers reports whether doc holds one of identifiers as a keyword anywhere;
// names is set when doc's keys are names (see namedSchemas). A value that is not a
// schema (an enum member, a default) may count too: the schema just goes without a
// shape.
func hasIdentifiers(doc any, names bool) bool {
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if !names && identifiers[k] || hasIdentifiers(v, !names && namedSchemas[k]) {
				return true
			}
		}
	case []any:
		for _, v := range d {
			if hasIdentifiers(v, false) {
				return true
			}
		}
	}
	return false
}

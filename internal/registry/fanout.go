package registry

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxSchemaFanout bounds how many subschemas validation may apply at one place of a
// document. References and combinators multiply: a chain of anyOf pairs of $refs doubles
// the work at every link, and a recursive definition that refers to itself twice per
// property doubles it at every level of nesting, so a schema of a few hundred bytes can
// make one call's validation run for hours. The JSON object count bounds a schema's
// size, not this.
const MaxSchemaFanout = 500

// maxFanoutSteps bounds the analysis itself, so that a schema built to make it slow is
// refused rather than analysed for long.
const maxFanoutSteps = 5_000_000

// checkFanout refuses a compiled schema that applies more than MaxSchemaFanout
// subschemas at any one place of a document at most maxDepth deep, or that refers back
// to itself without descending into a property or an item (validation would loop: the
// library fails every document that reaches such a place).
//
// The count is an upper bound: every branch of a combinator is counted as applied, of
// then and else (and of a dynamic reference's targets) the one that applies more, and a
// key's subschemas are counted across every subschema applied at its object, each
// maximised on its own.
//
// It returns the most subschemas applied at one place and the costly keywords of every
// subschema it walked.
func checkFanout(where string, root *jsonschema.Schema, maxDepth int) (perPlace int, costs keywordCosts, err error) {
	g := &fanout{where: where, node: map[*jsonschema.Schema]*fanNode{}}
	g.collect(root)
	for _, n := range g.order {
		if err := g.closure(n); err != nil {
			return 0, costs, err
		}
	}
	g.node[root].head = true
	for _, n := range g.order {
		forBelow(n.s, func(c *jsonschema.Schema) { g.node[c].head = true })
	}
	for _, n := range g.order {
		if n.head {
			g.expand(n)
		}
		if g.steps > maxFanoutSteps {
			return 0, costs, g.tooEntangled()
		}
	}
	if perPlace, err = g.depths(g.node[root], maxDepth); err != nil {
		return 0, costs, err
	}
	for _, n := range g.order {
		costs.add(n.s)
	}
	return perPlace, costs, nil
}

// fanout is the graph of a compiled schema's subschemas.
type fanout struct {
	where string // the schema, for messages
	node  map[*jsonschema.Schema]*fanNode
	order []*fanNode
	// dynamic: the subschemas declaring each $dynamicAnchor; recursive: those with
	// "$recursiveAnchor": true. A dynamic reference may resolve to any of them.
	dynamic   map[string][]*jsonschema.Schema
	recursive []*jsonschema.Schema
	steps     int
	// matched caches which patternProperties subschemas of a subschema match a name.
	matched map[patternKey][]*jsonschema.Schema
}

type patternKey struct {
	s    *jsonschema.Schema
	name string
}

// matching lists the patternProperties subschemas of s whose pattern matches name,
// computed once per (s, name): the same pair comes back at every level. Each match
// counts toward the analysis's steps by the pattern's program size times the name's
// length.
func (g *fanout) matching(s *jsonschema.Schema, name string) []*jsonschema.Schema {
	if len(s.PatternProperties) == 0 {
		return nil
	}
	k := patternKey{s, name}
	if m, ok := g.matched[k]; ok {
		return m
	}
	var m []*jsonschema.Schema
	for re, c := range s.PatternProperties {
		// Matching costs up to the program's size per byte of the name.
		if g.steps += 1 + patternSizeOf(re)*(len(name)+1)/2; g.steps > maxFanoutSteps {
			break // checkFanout refuses the schema
		}
		if re.MatchString(name) {
			m = append(m, c)
		}
	}
	if g.matched == nil {
		g.matched = map[patternKey][]*jsonschema.Schema{}
	}
	g.matched[k] = m
	return m
}

// fanNode is one subschema: the subschemas it applies at its own place (references,
// combinators, conditionals, dependent schemas) and those it applies one level down.
type fanNode struct {
	s    *jsonschema.Schema
	here []*jsonschema.Schema
	// choices: groups of subschemas of which one applies — then or else; where a
	// $dynamicRef or $recursiveRef may resolve (its static target and every subschema
	// with the matching anchor).
	choices [][]*jsonschema.Schema
	state   uint8 // closure: 0 not visited, 1 on the stack, 2 done
	total   int   // how many subschemas apply at this node's place, itself included
	// head: the node is entered from one level up (or is the root); applied lists the
	// subschemas applied at its place (the closure of here) for heads only.
	head    bool
	applied []applied // only those that apply something one level down
	// key names applied: heads with the same key have the same counts below them.
	key   string
	index int  // position in the graph's order
	below bool // the subschema applies something one level down
	// prev and cur: the most subschemas applied at one place d levels below this one.
	prev, cur int
	// names and prefix: the property names and prefix-item count of applied (the labels
	// of the places below), once labelled.
	names    []string
	prefix   int
	labelled bool
}

type applied struct {
	n     *fanNode
	times int
}

func (g *fanout) collect(root *jsonschema.Schema) {
	var staticRefs func(*jsonschema.Schema)
	staticRefs = func(s *jsonschema.Schema) {
		if s == nil || g.node[s] != nil {
			return
		}
		n := &fanNode{s: s, index: len(g.order)}
		g.node[s] = n
		g.order = append(g.order, n)
		if s.DynamicAnchor != "" {
			if g.dynamic == nil {
				g.dynamic = map[string][]*jsonschema.Schema{}
			}
			g.dynamic[s.DynamicAnchor] = append(g.dynamic[s.DynamicAnchor], s)
		}
		if s.RecursiveAnchor {
			g.recursive = append(g.recursive, s)
		}
		for _, c := range here(s) {
			staticRefs(c)
		}
		staticRefs(s.Then)
		staticRefs(s.Else)
		staticRefs(s.RecursiveRef)
		if s.DynamicRef != nil {
			staticRefs(s.DynamicRef.Ref)
		}
		forBelow(s, func(c *jsonschema.Schema) {
			n.below = true
			staticRefs(c)
		})
	}
	staticRefs(root)
	for _, n := range g.order {
		n.here = here(n.s)
		var alts []*jsonschema.Schema
		if d := n.s.DynamicRef; d != nil {
			alts = append(alts, d.Ref)
			if d.Anchor != "" {
				alts = append(alts, g.dynamic[d.Anchor]...)
			}
		}
		if r := n.s.RecursiveRef; r != nil {
			alts = append(alts, r)
			alts = append(alts, g.recursive...)
		}
		slices.SortFunc(alts, func(a, b *jsonschema.Schema) int { return strings.Compare(a.Location, b.Location) })
		if alts = slices.Compact(alts); len(alts) > 0 {
			n.choices = append(n.choices, alts)
		}
		if branches := slices.DeleteFunc([]*jsonschema.Schema{n.s.Then, n.s.Else}, isNil); len(branches) > 0 {
			n.choices = append(n.choices, branches)
		}
	}
}

func isNil(s *jsonschema.Schema) bool { return s == nil }

// here lists the subschemas s applies at its own place, except those of which only one
// applies (see fanNode.choices).
func here(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(c *jsonschema.Schema) {
		if c != nil {
			out = append(out, c)
		}
	}
	add(s.Ref)
	add(s.Not)
	add(s.If)
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range sortedKeys(s.DependentSchemas) {
		add(s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if c, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add(c)
		}
	}
	return out
}

// forBelow calls f with every subschema s applies one level down (to a property, an
// item, a property name or a string's decoded content).
func forBelow(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	each := func(cs ...*jsonschema.Schema) {
		for _, c := range cs {
			if c != nil {
				f(c)
			}
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		f(s.Properties[k])
	}
	for _, c := range s.PatternProperties {
		f(c)
	}
	a, _ := s.AdditionalProperties.(*jsonschema.Schema)
	each(a, s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.UnevaluatedItems, s.Items2020, s.ContentSchema)
	each(s.PrefixItems...)
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		f(items)
	case []*jsonschema.Schema:
		each(items...)
	}
	ai, _ := s.AdditionalItems.(*jsonschema.Schema)
	each(ai)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closure checks that n's references end (no cycle at one place) and counts the
// subschemas applied at n's place, refusing more than MaxSchemaFanout.
func (g *fanout) closure(n *fanNode) error {
	switch n.state {
	case 1:
		return fmt.Errorf(`%w: %s: %s refers back to itself without descending into a property or an item (a $ref cycle): validation would never end`,
			ErrInvalidSchema, g.where, schemaPointer(n.s))
	case 2:
		return nil
	}
	n.state = 1
	n.total = 1
	for _, c := range n.here {
		cn := g.node[c]
		if err := g.closure(cn); err != nil {
			return err
		}
		n.total = capped(n.total + cn.total)
	}
	for _, choice := range n.choices {
		alt := 0
		for _, c := range choice {
			cn := g.node[c]
			if err := g.closure(cn); err != nil {
				return err
			}
			alt = max(alt, cn.total)
		}
		n.total = capped(n.total + alt)
	}
	if n.total > MaxSchemaFanout {
		return g.fanoutError(n.s, n.total, 0)
	}
	n.state = 2
	return nil
}

// expand lists the subschemas applied at n's place (n's closure) with how many times
// each is applied. Of a dynamic reference's targets, each subschema counts as often as
// the target applying it most often does.
func (g *fanout) expand(n *fanNode) {
	times := g.applying(n)
	n.applied = make([]applied, 0, len(times))
	for m, k := range times {
		if m.below { // the others apply nothing one level down
			n.applied = append(n.applied, applied{m, k})
		}
	}
	slices.SortFunc(n.applied, func(a, b applied) int { return cmp.Compare(a.n.index, b.n.index) })
	var key strings.Builder
	for _, a := range n.applied {
		key.WriteString(strconv.Itoa(a.n.index))
		key.WriteByte('*')
		key.WriteString(strconv.Itoa(a.times))
		key.WriteByte(' ')
	}
	n.key = key.String()
}

func (g *fanout) applying(n *fanNode) map[*fanNode]int {
	times := map[*fanNode]int{n: 1}
	if g.steps++; g.steps > maxFanoutSteps {
		return times // checkFanout refuses the schema
	}
	for _, c := range n.here {
		for m, k := range g.applying(g.node[c]) {
			g.steps++
			times[m] = capped(times[m] + k)
		}
	}
	for _, choice := range n.choices {
		most := map[*fanNode]int{}
		for _, c := range choice {
			for m, k := range g.applying(g.node[c]) {
				g.steps++
				most[m] = max(most[m], k)
			}
		}
		for m, k := range most {
			times[m] = capped(times[m] + k)
		}
	}
	return times
}

// depths follows the document's levels from root down to maxDepth, keeping for each
// subschema the most subschemas applied at one place that many levels below it, and
// refuses the schema once that passes MaxSchemaFanout at the root. It stops early when
// no place is that deep or the counts stop changing (the schema's recursion, if any,
// does not multiply). It returns the most subschemas applied at any one place.
func (g *fanout) depths(root *fanNode, maxDepth int) (int, error) {
	for _, n := range g.order {
		n.prev = n.total
	}
	most := root.total
	for d := 1; d <= maxDepth; d++ {
		changed := false
		level := map[string]int{} // by key: heads applying the same subschemas share a count
		for _, n := range g.order {
			if !n.head {
				continue
			}
			c, ok := level[n.key]
			if !ok {
				c = g.below(n)
				level[n.key] = c
			}
			n.cur = c
			if n.cur != n.prev {
				changed = true
			}
			if g.steps > maxFanoutSteps {
				return 0, g.tooEntangled()
			}
		}
		if root.cur > MaxSchemaFanout {
			return 0, g.fanoutError(root.s, root.cur, d)
		}
		most = max(most, root.cur)
		for _, n := range g.order {
			n.prev = n.cur
		}
		if !changed || root.cur == 0 {
			return most, nil
		}
	}
	return most, nil
}

// below is the most subschemas applied at one place one level below n's place: over
// every property name, item index and key string, the sum over the subschemas applied
// at n's place of what each applies there (from prev).
func (g *fanout) below(n *fanNode) int {
	prev := func(c *jsonschema.Schema) int {
		if c == nil {
			return 0
		}
		return g.node[c].prev
	}
	sum := func(cs ...*jsonschema.Schema) int {
		t := 0
		for _, c := range cs {
			t = capped(t + prev(c))
		}
		return t
	}
	// Labels: every named property, every prefix index, and "any other key", "any
	// other index", a key as a string, decoded content.
	if !n.labelled {
		n.labelled = true
		for _, a := range n.applied {
			m := a.n
			for k := range m.s.Properties {
				n.names = append(n.names, k)
			}
			n.prefix = max(n.prefix, len(m.s.PrefixItems))
			if items, ok := m.s.Items.([]*jsonschema.Schema); ok {
				n.prefix = max(n.prefix, len(items))
			}
		}
		slices.Sort(n.names)
		n.names = slices.Compact(n.names)
	}
	names, prefix := n.names, n.prefix
	best := 0
	// atKey: a named key gets its property's subschema and every matching pattern's,
	// or additionalProperties when neither applies; another key matches some patterns
	// (at most all) or none.
	atKey := func(name string, named bool) int {
		t := 0
		for _, a := range n.applied {
			g.steps++
			s, times := a.n.s, a.times
			add, _ := s.AdditionalProperties.(*jsonschema.Schema)
			v := sum(s.UnevaluatedProperties)
			if named {
				c, ok := s.Properties[name]
				matched := g.matching(s, name)
				if ok {
					v = capped(v + prev(c))
				}
				v = capped(v + sum(matched...))
				if !ok && len(matched) == 0 {
					v = capped(v + prev(add))
				}
			} else {
				patterns := 0
				for _, c := range s.PatternProperties {
					patterns = capped(patterns + prev(c))
				}
				v = capped(v + max(patterns, prev(add)))
			}
			t = capped(t + capped(v*times))
		}
		return t
	}
	for _, name := range names {
		best = max(best, atKey(name, true))
		if g.steps > maxFanoutSteps {
			return 0 // depths refuses the schema
		}
	}
	best = max(best, atKey("", false))
	atIndex := func(i int) int {
		t := 0
		for _, a := range n.applied {
			g.steps++
			s, times := a.n.s, a.times
			v := sum(s.Contains, s.UnevaluatedItems)
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				v = capped(v + prev(items))
			case []*jsonschema.Schema:
				if i < len(items) {
					v = capped(v + prev(items[i]))
				} else if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
					v = capped(v + prev(ai))
				}
			}
			if i < len(s.PrefixItems) {
				v = capped(v + prev(s.PrefixItems[i]))
			} else {
				v = capped(v + prev(s.Items2020))
			}
			t = capped(t + capped(v*times))
		}
		return t
	}
	for i := 0; i <= prefix; i++ { // i == prefix: every later index
		best = max(best, atIndex(i))
	}
	keyString, content := 0, 0
	for _, a := range n.applied {
		keyString = capped(keyString + capped(prev(a.n.s.PropertyNames)*a.times))
		content = capped(content + capped(prev(a.n.s.ContentSchema)*a.times))
	}
	return max(best, keyString, content)
}

// capped saturates counts just past the limit, so that sums and products of them
// never overflow.
func capped(n int) int { return min(n, MaxSchemaFanout+1) }

func (g *fanout) tooEntangled() error {
	return fmt.Errorf("%w: %s: its references and combinators are too entangled to check", ErrLimit, g.where)
}

func (g *fanout) fanoutError(s *jsonschema.Schema, n, depth int) error {
	where := "at " + schemaPointer(s)
	if depth > 0 {
		where = fmt.Sprintf("%d levels below %s", depth, schemaPointer(s))
	}
	more := ""
	if n > MaxSchemaFanout {
		more = "more than "
		n = MaxSchemaFanout
	}
	return fmt.Errorf("%w: %s: validation would apply %s%d subschemas at one place %s (references and anyOf/allOf/oneOf branches multiply); the limit is %d",
		ErrLimit, g.where, more, n, where, MaxSchemaFanout)
}

// schemaPointer is a subschema's location in the submitted document, as "#/$defs/a",
// cut as a violation's pointer is: its keys may be as long as the schema, and percent
// encoding triples them.
func schemaPointer(s *jsonschema.Schema) string {
	loc := strings.TrimPrefix(s.Location, schemaBase)
	if loc == "" || loc == "#" {
		return "the root"
	}
	return truncate(loc)
}

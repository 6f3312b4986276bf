package compiler

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Input bounds. A manifest is a small hand-written file; anything beyond these
// limits is refused with a diagnostic rather than processed, so a hostile
// upload cannot make the Studio spend unbounded memory or time.
const (
	// MaxManifestSize is the largest manifest Compile accepts, in bytes.
	MaxManifestSize = 1 << 20
	// MaxDepth is the deepest nesting of YAML collections Compile accepts,
	// counting through aliases.
	MaxDepth = 64
	// MaxAliases is the most alias nodes (*name) a manifest may use.
	MaxAliases = 100
	// MaxExpandedNodes bounds the node count of the document after every alias
	// is expanded, which defeats "billion laughs" documents.
	MaxExpandedNodes = 100000
)

// field is one key/value pair of a YAML mapping.
type field struct {
	key *yaml.Node
	val *yaml.Node
}

// checker walks one manifest's node tree and collects diagnostics.
type checker struct {
	diags []Diagnostic
	exprs *expressionIndex
	// root is the document's root mapping, used to find the key that names
	// an object when a diagnostic must point at it (see missing).
	root *yaml.Node
	// keyIndex caches key positions of large mappings for mappingLookup.
	keyIndex map[*yaml.Node]map[string]int
}

func (c *checker) add(sev Severity, n *yaml.Node, path pathT, msg string) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
		// A block mapping or list starts on the line after its key, at its
		// first entry; a problem with the field as a whole belongs on the
		// line that names it (`build:`), as a missing key does (see missing).
		if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle == 0 {
			if k := c.lookupKey(c.root, path.String(), n); k != nil {
				line, col = k.Line, k.Column
			}
		}
	}
	c.diags = append(c.diags, Diagnostic{Severity: sev, Path: path.String(), Line: line, Column: col, Message: msg})
}

func (c *checker) errorf(n *yaml.Node, path pathT, msg string) { c.add(SeverityError, n, path, msg) }

func (c *checker) warnf(n *yaml.Node, path pathT, msg string) { c.add(SeverityWarning, n, path, msg) }

// join appends a key to a path.
func join(p pathT, key string) pathT {
	return pathT{base: p.materialize().base, key: key}
}

// index appends a sequence index to a path.
func index(p pathT, i int) pathT {
	if p.item > 0 {
		p = p.materialize()
	}
	p.item = i + 1
	return p
}

// resolve follows alias nodes to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// kindName names a node's type for "expected X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!str":
			return "a string"
		}
		return "a scalar"
	}
	return "an unsupported node"
}

// entries returns the pairs of a mapping node, reporting duplicate keys at
// their second occurrence and expanding YAML merge keys (<<). It reports a
// type error and returns ok=false when n is not a mapping. A null node (an
// empty value such as `ports:`) is an empty mapping.
func (c *checker) entries(n *yaml.Node, path pathT) (fs []field, ok bool) {
	n = resolve(n)
	if n == nil {
		return nil, true
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, path, "expected a mapping, got "+kindName(n))
		return nil, false
	}
	fs = make([]field, 0, len(n.Content)/2)
	var merged []field
	// Small mappings (nearly all of them) are scanned; large ones get a set,
	// so a mapping of many thousand keys is not quadratic.
	var seen map[string]bool
	if len(n.Content) > 64 {
		seen = make(map[string]bool, len(n.Content)/2)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			c.errorf(k, path, "mapping keys must be plain strings, got "+kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merged = append(merged, c.mergeSources(v, path)...)
			continue
		}
		dup := false
		if seen != nil {
			dup = seen[k.Value]
			seen[k.Value] = true
		} else {
			for _, f := range fs {
				if f.key.Value == k.Value {
					dup = true
					break
				}
			}
		}
		if dup {
			c.errorf(k, join(path, k.Value), "duplicate key `"+k.Value+"`; each key may appear once in a mapping")
			continue
		}
		fs = append(fs, field{key: k, val: v})
	}
	for _, m := range merged {
		present := false
		if seen != nil {
			present = seen[m.key.Value]
		} else {
			for _, f := range fs {
				if f.key.Value == m.key.Value {
					present = true
					break
				}
			}
		}
		if !present {
			fs = append(fs, m)
			if seen != nil {
				seen[m.key.Value] = true
			}
		}
	}
	return fs, true
}

// mergeSources returns the pairs a YAML merge key brings in: explicit keys win
// over merged ones, and earlier merge sources win over later ones.
func (c *checker) mergeSources(v *yaml.Node, path pathT) []field {
	v = resolve(v)
	var srcs []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		srcs = []*yaml.Node{v}
	case yaml.SequenceNode:
		srcs = v.Content
	default:
		c.errorf(v, path, "a merge key (<<) must name a mapping or a list of mappings")
		return nil
	}
	var out []field
	var seen map[string]bool
	for _, s := range srcs {
		s = resolve(s)
		if s.Kind != yaml.MappingNode {
			c.errorf(s, path, "a merge key (<<) must name a mapping or a list of mappings")
			continue
		}
		fs, _ := c.entries(s, path)
		for _, f := range fs {
			if seen[f.key.Value] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[f.key.Value] = true
			out = append(out, f)
		}
	}
	return out
}

// object is a mapping whose keys come from a fixed vocabulary.
type object struct {
	node   *yaml.Node
	path   pathT // materialised
	fields []field
}

// get returns the value node of key, or nil when absent.
func (o object) get(key string) *yaml.Node {
	for _, f := range o.fields {
		if f.key.Value == key {
			return resolve(f.val)
		}
	}
	return nil
}

// at returns the path of key inside the object.
func (o object) at(key string) pathT { return pathT{base: o.path.base, key: key} }

// object checks that n is a mapping with only known keys, reporting unknown
// keys with the closest known one. ok is false when n is not a mapping.
func (c *checker) object(n *yaml.Node, path pathT, known []string) (object, bool) {
	n = resolve(n)
	fs, ok := c.entries(n, path)
	o := object{node: n, path: path.materialize()}
	if !ok {
		return o, false
	}
	kept := fs[:0]
	for _, f := range fs {
		if contains(known, f.key.Value) {
			kept = append(kept, f)
			continue
		}
		c.unknownField(f.key, join(path, f.key.Value), known)
	}
	o.fields = kept
	return o, true
}

func (c *checker) unknownField(k *yaml.Node, path pathT, known []string) {
	msg := "unknown field `" + k.Value + "`"
	if s := closest(k.Value, known); s != "" {
		msg += "; did you mean `" + s + "`?"
	} else {
		msg += "; allowed fields are " + quoteList(known)
	}
	c.errorf(k, path, msg)
}

// missing reports a required key absent from o. DESIGN.md: "a missing
// required key is reported at the line of its parent", so the diagnostic sits
// on the key that names o (`http:` for a port without `port`); see parentKey.
func (c *checker) missing(o object, key, what string) {
	msg := "missing required field `" + key + "`"
	if what != "" {
		msg += ": " + what
	}
	c.errorf(c.parentKey(o), o.at(key), msg)
}

// parentKey returns the node a diagnostic about o as a whole is reported
// at: the mapping key that names o, found by following o's path from the
// document root. This runs only when a diagnostic is reported, so the valid
// path pays nothing for it.
//
// Where o has no key of its own it falls back to o's node: the document root
// is reported at its first key (the first line with content, past any
// leading comments; line 1 column 1 when the file starts with a key), and a
// list item at its first entry, on the line of its dash.
func (c *checker) parentKey(o object) *yaml.Node {
	if k := c.lookupKey(c.root, o.path.String(), o.node); k != nil {
		return k
	}
	return o.node
}

// lookupKey follows a dotted path such as applications.web.ports.http (with
// [i] list indexes) from root and returns the key node of its last segment,
// or nil when the path ends at a list item, cannot be followed, or does not
// lead to want. A key may itself contain dots (a build argument named
// `A.B`), so a segment that names no key is tried joined with the next.
func (c *checker) lookupKey(root *yaml.Node, path string, want *yaml.Node) *yaml.Node {
	if root == nil || path == "" {
		return nil
	}
	return c.followKeys(resolve(root), strings.Split(path, "."), want, 0)
}

func (c *checker) followKeys(cur *yaml.Node, segs []string, want *yaml.Node, depth int) *yaml.Node {
	if depth > MaxDepth {
		return nil
	}
	for j := 1; j <= len(segs); j++ {
		seg := strings.Join(segs[:j], ".")
		name, idx, _ := strings.Cut(seg, "[")
		k, v := c.mappingLookup(cur, name, 0)
		if k == nil {
			if idx != "" {
				return nil
			}
			continue
		}
		last, next := k, resolve(v)
		for idx != "" && next != nil {
			num, rest, ok := strings.Cut(idx, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil || next.Kind != yaml.SequenceNode || i < 0 || i >= len(next.Content) {
				next = nil
				break
			}
			last, next = nil, resolve(next.Content[i])
			idx = strings.TrimPrefix(rest, "[")
		}
		if next == nil {
			continue
		}
		if j == len(segs) {
			if next == want {
				return last
			}
			continue
		}
		if k := c.followKeys(next, segs[j:], want, depth+1); k != nil {
			return k
		}
	}
	return nil
}

// mappingLookup finds key in mapping m the way entries does: the first
// explicit occurrence wins, then merge (<<) sources in order.
func (c *checker) mappingLookup(m *yaml.Node, key string, depth int) (k, v *yaml.Node) {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode || depth > MaxDepth {
		return nil, nil
	}
	if len(m.Content) > 64 {
		// Large mappings get an index, so reporting at every one of
		// thousands of entries is not quadratic.
		idx, ok := c.keyIndex[m]
		if !ok {
			idx = mappingIndex(m)
			if c.keyIndex == nil {
				c.keyIndex = map[*yaml.Node]map[string]int{}
			}
			c.keyIndex[m] = idx
		}
		if i, ok := idx[key]; ok {
			return resolve(m.Content[i]), m.Content[i+1]
		}
		if _, merges := idx["<<"]; !merges {
			return nil, nil
		}
		// Not an explicit key: fall through to the merge sources.
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn := resolve(m.Content[i])
		if kn.Kind != yaml.ScalarNode {
			continue
		}
		if kn.ShortTag() == "!!merge" {
			merges = append(merges, m.Content[i+1])
			continue
		}
		if kn.Value == key {
			return kn, m.Content[i+1]
		}
	}
	for _, src := range merges {
		src = resolve(src)
		srcs := []*yaml.Node{src}
		if src.Kind == yaml.SequenceNode {
			srcs = src.Content
		}
		for _, s := range srcs {
			if k, v := c.mappingLookup(s, key, depth+1); k != nil {
				return k, v
			}
		}
	}
	return nil, nil
}

// mappingIndex maps each explicit key of m to its position, first
// occurrence winning; a merge key (<<) is recorded under "<<" only to say
// that merge sources exist.
func mappingIndex(m *yaml.Node) map[string]int {
	idx := make(map[string]int, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn := resolve(m.Content[i])
		if kn.Kind != yaml.ScalarNode {
			continue
		}
		if kn.ShortTag() == "!!merge" {
			idx["<<"] = i
			continue
		}
		if _, ok := idx[kn.Value]; !ok {
			idx[kn.Value] = i
		}
	}
	return idx
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseDocument turns bytes into the root mapping node, or reports why not.
func (c *checker) parseDocument(src []byte) *yaml.Node {
	if len(src) > MaxManifestSize {
		c.errorf(nil, rootPath, "manifest is "+strconv.Itoa(len(src))+" bytes; the limit is 1 MiB ("+strconv.Itoa(MaxManifestSize)+" bytes)")
		return nil
	}
	if !utf8.Valid(src) {
		line, col := invalidUTF8Position(src)
		c.diags = append(c.diags, Diagnostic{Severity: SeverityError, Line: line, Column: col, Message: "manifest is not valid UTF-8 text"})
		return nil
	}
	var doc yaml.Node
	if err := unmarshalSafely(src, &doc); err != nil {
		c.syntaxError(err)
		return nil
	}
	if doc.Kind == 0 {
		c.errorf(nil, rootPath, "manifest is empty; declare at least `name` and one application, database or bucket")
		return nil
	}
	// yaml.Unmarshal reads only the first document. A second one can only
	// start after a document marker at the start of a line, so the slower
	// streaming check runs only when such a marker exists.
	if hasDocumentMarker(src) {
		dec := yaml.NewDecoder(bytes.NewReader(src))
		var first yaml.Node
		if err := decodeSafely(dec, &first); err == nil {
			for {
				next := yaml.Node{}
				err := decodeSafely(dec, &next)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					c.syntaxError(err)
					return nil
				}
				// A stray trailing `---` opens an empty document; only
				// a document with content is a second manifest.
				if emptyDocument(&next) {
					continue
				}
				c.errorf(&next, rootPath, "manifest contains more than one YAML document; put everything in a single document without `---` separators")
				return nil
			}
		}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			c.errorf(nil, rootPath, "manifest is empty; declare at least `name` and one application, database or bucket")
			return nil
		}
		root = root.Content[0]
	}
	if !c.checkBounds(root) {
		return nil
	}
	root = resolve(root)
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		c.errorf(root, rootPath, "manifest is empty; declare at least `name` and one application, database or bucket")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		c.errorf(root, rootPath, "the manifest must be a mapping of top-level fields (name, applications, ...), got "+kindName(root))
		return nil
	}
	return root
}

// emptyDocument reports whether a decoded document holds nothing but null.
func emptyDocument(d *yaml.Node) bool {
	if d.Kind == yaml.DocumentNode {
		if len(d.Content) == 0 {
			return true
		}
		d = d.Content[0]
	}
	return d.Kind == 0 || d.Kind == yaml.ScalarNode && d.ShortTag() == "!!null" && d.Value == "" && d.Anchor == ""
}

// hasDocumentMarker reports whether a line starts with "---" or "...".
func hasDocumentMarker(src []byte) bool {
	for i := 0; i+3 <= len(src); i++ {
		if (i == 0 || src[i-1] == '\n') && (src[i] == '-' || src[i] == '.') {
			if string(src[i:i+3]) == "---" || string(src[i:i+3]) == "..." {
				return true
			}
		}
	}
	return false
}

// unmarshalSafely parses the first document, turning a panic inside the YAML
// library into an error.
func unmarshalSafely(src []byte, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("yaml: could not parse the document")
		}
	}()
	return yaml.Unmarshal(src, n)
}

// decodeSafely decodes one document and turns a panic inside the YAML library
// into an error: Compile must never panic on user input.
func decodeSafely(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("yaml: could not parse the document")
		}
	}()
	return dec.Decode(n)
}

// syntaxError converts a YAML library error into a positioned diagnostic. The
// library reports "yaml: line N: message" without a column.
func (c *checker) syntaxError(err error) {
	msg := err.Error()
	line := 1
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	c.diags = append(c.diags, Diagnostic{Severity: SeverityError, Line: line, Column: 1, Message: "YAML syntax error: " + msg})
}

func invalidUTF8Position(src []byte) (int, int) {
	line, col := 1, 1
	for len(src) > 0 {
		r, size := utf8.DecodeRune(src)
		if r == utf8.RuneError && size <= 1 {
			return line, col
		}
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
		src = src[size:]
	}
	return line, col
}

// checkBounds enforces the depth, alias and expansion limits on the raw node
// tree before anything follows an alias.
func (c *checker) checkBounds(root *yaml.Node) bool {
	b := bounds{}
	size, _ := b.measure(root, 1)
	switch {
	case b.tooDeep != nil:
		c.errorf(b.tooDeep, rootPath, "manifest nests deeper than "+strconv.Itoa(MaxDepth)+" levels")
	case b.cycle != nil:
		c.errorf(b.cycle, rootPath, "YAML alias refers to a node that contains it")
	case b.aliases > MaxAliases:
		c.errorf(b.lastAlias, rootPath, "manifest uses more than "+strconv.Itoa(MaxAliases)+" YAML aliases")
	case size > MaxExpandedNodes:
		if b.aliases > 0 {
			c.errorf(b.lastAlias, rootPath, "YAML aliases expand the manifest beyond "+strconv.Itoa(MaxExpandedNodes)+" nodes")
		} else {
			c.errorf(nil, rootPath, "manifest has more than "+strconv.Itoa(MaxExpandedNodes)+" YAML nodes")
		}
	default:
		return true
	}
	return false
}

type bounds struct {
	sizes     map[*yaml.Node][2]int // anchored node -> expanded size, height
	active    map[*yaml.Node]bool
	aliases   int
	lastAlias *yaml.Node
	tooDeep   *yaml.Node
	cycle     *yaml.Node
}

// measure returns the expanded node count and height of n, counting aliases
// by what they name, and records the first limit violation.
func (b *bounds) measure(n *yaml.Node, depth int) (size, height int) {
	if n == nil || b.tooDeep != nil || b.cycle != nil {
		return 0, 0
	}
	if depth > MaxDepth {
		b.tooDeep = n
		return 0, 0
	}
	if n.Kind == yaml.AliasNode {
		b.aliases++
		b.lastAlias = n
		if b.aliases > MaxAliases {
			return 0, 0
		}
		t := n.Alias
		if t == nil {
			return 1, 0
		}
		if b.active[t] {
			b.cycle = n
			return 0, 0
		}
		if m, ok := b.sizes[t]; ok {
			if depth+m[1] > MaxDepth {
				b.tooDeep = n
			}
			return m[0], m[1]
		}
		return b.measure(t, depth)
	}
	if n.Anchor != "" {
		if b.active == nil {
			b.active, b.sizes = map[*yaml.Node]bool{}, map[*yaml.Node][2]int{}
		}
		b.active[n] = true
	}
	size = 1
	for _, ch := range n.Content {
		s, h := b.measure(ch, depth+1)
		size += s
		if h+1 > height {
			height = h + 1
		}
		if size > MaxExpandedNodes {
			break
		}
	}
	if n.Anchor != "" {
		delete(b.active, n)
		b.sizes[n] = [2]int{size, height}
	}
	return size, height
}

// pathT is a manifest path built lazily: the dotted base is materialised
// once per object, and the last key and list index are joined only when a
// diagnostic needs the text. This keeps the valid path allocation-free.
type pathT struct {
	base string
	key  string
	item int // list index + 1; 0 means no index
}

// rootPath is the path of the document root.
var rootPath = pathT{}

// keyPath is the path of a top-level key.
func keyPath(key string) pathT { return pathT{key: key} }

// String renders the path, e.g. applications.web.routes.public.aliases[0].
func (p pathT) String() string {
	s := p.base
	if p.key != "" {
		if s == "" {
			s = p.key
		} else {
			s = s + "." + p.key
		}
	}
	if p.item > 0 {
		s += "[" + strconv.Itoa(p.item-1) + "]"
	}
	return s
}

// materialize renders the path once so children can extend it cheaply.
func (p pathT) materialize() pathT {
	if p.key == "" && p.item == 0 {
		return p
	}
	return pathT{base: p.String()}
}

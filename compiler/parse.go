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
		c.syntaxError(src, err)
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
					c.syntaxError(src, err)
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
// An error about a tab is reported where the tab is: the library names the
// line of the enclosing block (the key it was scanning), not the line of the
// offending character.
func (c *checker) syntaxError(src []byte, err error) {
	msg := err.Error()
	line, col := 1, 1
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	if strings.Contains(msg, "tab character") {
		if l, cl, ok := indentTab(src, line); ok {
			line, col = l, cl
		}
	}
	c.diags = append(c.diags, Diagnostic{Severity: SeverityError, Line: line, Column: col, Message: "YAML syntax error: " + msg})
}

// indentTab finds the first tab in the indentation of a line at or after
// from (1-based): the character a "tab character" error is about. Columns
// count characters, as the YAML library's do.
func indentTab(src []byte, from int) (line, col int, ok bool) {
	for i, l := range strings.Split(string(src), "\n") {
		if i+1 < from {
			continue
		}
		for j, r := range []rune(l) {
			if r == '\t' {
				return i + 1, j + 1, true
			}
			if r != ' ' {
				break
			}
		}
	}
	return 0, 0, false
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

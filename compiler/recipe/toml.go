package recipe

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// Input bounds, the same as for YAML manifests: a recipe is a small
// hand-written file, and anything beyond these limits is refused with a
// diagnostic rather than processed.
const (
	// MaxSize is the largest document accepted, in bytes.
	MaxSize = compiler.MaxManifestSize
	// MaxDepth is the deepest nesting of tables and arrays accepted,
	// counting every key of a dotted key or header.
	MaxDepth = compiler.MaxDepth
	// MaxValues bounds the number of values in a document.
	MaxValues = compiler.MaxExpandedNodes
)

// pos is a 1-based line and column; columns count characters, as the YAML
// library's do, so the Studio can underline the token.
type pos struct{ line, col int }

type valueKind int

const (
	kindTable valueKind = iota
	kindArray
	kindString
	kindInteger
	kindFloat
	kindBool
	kindDatetime
)

// origin says how a table came to exist; TOML's rules against defining a
// table twice depend on it.
type origin int

const (
	originImplicit origin = iota // a parent named by a header ([a] of [a.b])
	originHeader                 // defined by its own [header]
	originDotted                 // created by a dotted key (a.b = 1)
	originInline                 // an inline table { ... }, closed
)

// value is one TOML value with its position and the position of the key
// that names it.
type value struct {
	kind   valueKind
	pos    pos // the value itself; a table's header or key
	keyPos pos // the key naming the value, or pos for array items
	str    string
	num    int64
	flt    float64
	boolV  bool
	// tables
	keys   []string
	fields map[string]*value
	origin origin
	// arrays
	items      []*value
	tableArray bool // created by [[header]]
}

func (v *value) get(k string) *value {
	if v == nil || v.fields == nil {
		return nil
	}
	return v.fields[k]
}

func (v *value) set(k string, x *value) {
	if v.fields == nil {
		v.fields = map[string]*value{}
	}
	v.keys = append(v.keys, k)
	v.fields[k] = x
}

func (v *value) kindName() string {
	switch v.kind {
	case kindTable:
		return "a table"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindInteger:
		return "an integer"
	case kindFloat:
		return "a float"
	case kindBool:
		return "a boolean"
	}
	return "a date-time"
}

// document parses TOML source into a tree of values, applying TOML's rules
// that the tokenizer does not (a key or table defined twice, a table
// extended after it was closed), and reporting each problem with its
// position.
type document struct {
	c       *checker
	src     []byte
	lines   []int // byte offset of each line start
	root    *value
	cur     *value // the table keys go to; nil after a bad header
	curPath string // cur's path, such as artifacts[1].delta
	count   int
	stopped bool
}

func (c *checker) parse(src []byte, what string) *value {
	if len(src) > MaxSize {
		c.errorAt(pos{1, 1}, "", "the "+what+" is "+strconv.Itoa(len(src))+" bytes; the limit is 1 MiB ("+strconv.Itoa(MaxSize)+" bytes)")
		return nil
	}
	d := &document{c: c, src: src, root: &value{kind: kindTable, pos: pos{1, 1}, keyPos: pos{1, 1}, origin: originHeader}}
	d.lines = append(d.lines, 0)
	for i, b := range src {
		if b == '\n' {
			d.lines = append(d.lines, i+1)
		}
	}
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, size := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		c.errorAt(d.position(off), "", "the "+what+" is not valid UTF-8 text")
		return nil
	}
	if strings.TrimSpace(string(src)) == "" {
		c.errorAt(pos{1, 1}, "", "the "+what+" is empty")
		return nil
	}
	d.cur, d.curPath = d.root, ""
	p := &unstable.Parser{}
	p.Reset(src)
	if err := d.run(p); err != nil {
		var perr *unstable.ParserError
		at := pos{1, 1}
		msg := err.Error()
		if errors.As(err, &perr) {
			msg = perr.Message
			if off, ok := d.offsetOf(perr.Highlight); ok {
				at = d.position(off)
			}
		}
		c.errorAt(at, "", "TOML syntax error: "+msg)
		return nil
	}
	if d.stopped {
		return nil
	}
	return d.root
}

// run feeds every top-level expression to the tree, turning a panic of the
// tokenizer into an error: validation must never take the Studio down.
func (d *document) run(p *unstable.Parser) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("the document could not be read")
		}
	}()
	for p.NextExpression() && !d.stopped {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			d.header(d.keyParts(e.Key()), e.Kind == unstable.ArrayTable)
		case unstable.KeyValue:
			if d.cur == nil {
				continue
			}
			parts := d.keyParts(e.Key())
			v := d.convert(e.Value(), 1, d.firstKeyPos(e), check.Join(d.curPath, joinParts(parts)))
			if v == nil {
				continue
			}
			d.assign(d.cur, d.curPath, parts, v)
		}
	}
	return p.Error()
}

// offsetOf finds where a parser error's highlight starts in the source.
func (d *document) offsetOf(h []byte) (int, bool) {
	if len(h) == 0 || cap(h) > cap(d.src) {
		return len(d.src), len(d.src) > 0 && h != nil
	}
	off := cap(d.src) - cap(h)
	if off < 0 || off > len(d.src) {
		return 0, false
	}
	return off, true
}

// position turns a byte offset into a line and a character column.
func (d *document) position(off int) pos {
	line := 0
	lo, hi := 0, len(d.lines)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if d.lines[mid] <= off {
			line = mid
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	start := d.lines[line]
	if off > len(d.src) {
		off = len(d.src)
	}
	return pos{line + 1, utf8.RuneCount(d.src[start:off]) + 1}
}

func (d *document) nodePos(n *unstable.Node) pos {
	if n.Raw.Length == 0 && n.Raw.Offset == 0 {
		return pos{}
	}
	return d.position(int(n.Raw.Offset))
}

// firstKeyPos is the position of a key-value's first key.
func (d *document) firstKeyPos(e *unstable.Node) pos {
	it := e.Key()
	if it.Next() {
		return d.nodePos(it.Node())
	}
	return pos{}
}

type keyPart struct {
	name string
	pos  pos
}

func (d *document) keyParts(it unstable.Iterator) []keyPart {
	var parts []keyPart
	for it.Next() {
		n := it.Node()
		parts = append(parts, keyPart{name: string(n.Data), pos: d.nodePos(n)})
	}
	return parts
}

func (d *document) tooDeep(at pos, depth int) bool {
	if depth > MaxDepth {
		d.c.errorAt(at, "", "the document nests deeper than "+strconv.Itoa(MaxDepth)+" levels")
		d.stopped = true
		return true
	}
	return false
}

func (d *document) counted(at pos) bool {
	d.count++
	if d.count > MaxValues {
		d.c.errorAt(at, "", "the document has more than "+strconv.Itoa(MaxValues)+" values")
		d.stopped = true
		return false
	}
	return true
}

// convert turns a parsed value into the tree, with its position.
func (d *document) convert(n *unstable.Node, depth int, near pos, path string) *value {
	at := d.nodePos(n)
	if at.line == 0 {
		// Arrays carry no position of their own.
		at = near
	}
	if d.stopped || d.tooDeep(at, depth) || !d.counted(at) {
		return nil
	}
	v := &value{pos: at, keyPos: at}
	switch n.Kind {
	case unstable.String:
		v.kind, v.str = kindString, string(n.Data)
	case unstable.Bool:
		v.kind, v.boolV = kindBool, string(n.Data) == "true"
	case unstable.Integer:
		v.kind = kindInteger
		s := strings.ReplaceAll(string(n.Data), "_", "")
		x, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			d.c.errorAt(at, path, "integer `"+string(n.Data)+"` is out of range")
		}
		v.num = x
	case unstable.Float:
		v.kind = kindFloat
		v.flt, _ = strconv.ParseFloat(strings.ReplaceAll(string(n.Data), "_", ""), 64)
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		v.kind, v.str = kindDatetime, string(n.Data)
	case unstable.Array:
		v.kind = kindArray
		it := n.Children()
		for it.Next() {
			x := d.convert(it.Node(), depth+1, at, check.Index(path, len(v.items)))
			if x == nil {
				return nil
			}
			v.items = append(v.items, x)
		}
		if len(v.items) > 0 {
			v.pos = v.items[0].pos
		}
	case unstable.InlineTable:
		v.kind, v.origin = kindTable, originInline
		it := n.Children()
		for it.Next() {
			kv := it.Node()
			parts := d.keyParts(kv.Key())
			x := d.convert(kv.Value(), depth+1, at, check.Join(path, joinParts(parts)))
			if x == nil {
				return nil
			}
			if !d.assignInline(v, path, parts, x, depth) {
				return nil
			}
		}
	default:
		d.c.errorAt(at, path, "unsupported TOML value")
		return nil
	}
	return v
}

// assignInline sets a key of an inline table being built; dotted keys
// create nested tables that are closed with it.
func (d *document) assignInline(t *value, path string, parts []keyPart, x *value, depth int) bool {
	if len(parts) == 0 || d.tooDeep(parts[0].pos, depth+len(parts)) {
		return false
	}
	for i, p := range parts {
		path = check.Join(path, p.name)
		if i == len(parts)-1 {
			if prev := t.get(p.name); prev != nil {
				d.c.errorAt(p.pos, path, "duplicate key `"+p.name+"`; it is already defined at line "+strconv.Itoa(prev.keyPos.line))
				return true
			}
			name(x, p.pos)
			t.set(p.name, x)
			return true
		}
		child := t.get(p.name)
		if child == nil {
			child = &value{kind: kindTable, origin: originInline, pos: p.pos, keyPos: p.pos}
			t.set(p.name, child)
		} else if child.kind != kindTable {
			d.c.errorAt(p.pos, path, "key `"+p.name+"` is already defined as "+child.kindName()+" at line "+strconv.Itoa(child.keyPos.line))
			return true
		}
		t = child
	}
	return true
}

// header handles [a.b.c] and [[a.b.c]].
func (d *document) header(parts []keyPart, array bool) {
	d.cur, d.curPath = nil, ""
	if len(parts) == 0 || d.tooDeep(parts[0].pos, len(parts)) {
		return
	}
	t := d.root
	name, path := "", ""
	for i, p := range parts {
		name = check.Join(name, p.name)
		path = check.Join(path, p.name)
		child := t.get(p.name)
		if i < len(parts)-1 {
			switch {
			case child == nil:
				child = &value{kind: kindTable, origin: originImplicit, pos: p.pos, keyPos: p.pos}
				t.set(p.name, child)
			case child.kind == kindArray && child.tableArray:
				path = check.Index(path, len(child.items)-1)
				child = child.items[len(child.items)-1]
			case child.kind != kindTable || child.origin == originInline:
				d.c.errorAt(p.pos, path, "`"+name+"` is already defined as "+definedAs(child)+" at line "+strconv.Itoa(child.keyPos.line)+"; a table header cannot add to it")
				return
			}
			t = child
			continue
		}
		if array {
			switch {
			case child == nil:
				child = &value{kind: kindArray, tableArray: true, pos: p.pos, keyPos: p.pos}
				t.set(p.name, child)
			case child.kind == kindArray && child.tableArray:
			default:
				d.c.errorAt(p.pos, path, "`"+name+"` is already defined as "+definedAs(child)+" at line "+strconv.Itoa(child.keyPos.line)+"; `[["+name+"]]` cannot add an item to it")
				return
			}
			item := &value{kind: kindTable, origin: originHeader, pos: p.pos, keyPos: p.pos}
			child.items = append(child.items, item)
			d.cur, d.curPath = item, check.Index(path, len(child.items)-1)
			return
		}
		switch {
		case child == nil:
			child = &value{kind: kindTable, origin: originHeader, pos: p.pos, keyPos: p.pos}
			t.set(p.name, child)
		case child.kind == kindTable && child.origin == originImplicit:
			child.origin, child.pos, child.keyPos = originHeader, p.pos, p.pos
		case child.kind == kindTable && child.origin == originHeader:
			d.c.errorAt(p.pos, path, "table `["+name+"]` is defined twice; its first header is at line "+strconv.Itoa(child.keyPos.line)+" (TOML allows one header per table; `[["+name+"]]` starts another item of an array)")
			return
		default:
			d.c.errorAt(p.pos, path, "`"+name+"` is already defined as "+definedAs(child)+" at line "+strconv.Itoa(child.keyPos.line)+"; `["+name+"]` cannot define it again")
			return
		}
		d.cur, d.curPath = child, path
	}
}

func definedAs(v *value) string {
	switch {
	case v.kind == kindTable && v.origin == originInline:
		return "an inline table"
	case v.kind == kindTable && v.origin == originDotted:
		return "a table by dotted keys"
	case v.kind == kindArray && v.tableArray:
		return "an array of tables"
	}
	return v.kindName()
}

// assign sets a (possibly dotted) key in the current table.
func (d *document) assign(t *value, path string, parts []keyPart, x *value) {
	if len(parts) == 0 || d.tooDeep(parts[0].pos, len(parts)) {
		return
	}
	for i, p := range parts {
		child := t.get(p.name)
		path = check.Join(path, p.name)
		if i == len(parts)-1 {
			if child != nil {
				d.c.errorAt(p.pos, path, "duplicate key `"+p.name+"`; it is already defined at line "+strconv.Itoa(child.keyPos.line))
				return
			}
			name(x, p.pos)
			t.set(p.name, x)
			return
		}
		switch {
		case child == nil:
			child = &value{kind: kindTable, origin: originDotted, pos: p.pos, keyPos: p.pos}
			t.set(p.name, child)
		case child.kind == kindTable && (child.origin == originDotted || child.origin == originImplicit):
		default:
			d.c.errorAt(p.pos, path, "`"+p.name+"` is already defined as "+definedAs(child)+" at line "+strconv.Itoa(child.keyPos.line)+"; a dotted key cannot add to it")
			return
		}
		t = child
	}
}

// name records the key naming x; an empty array, which has no position of
// its own, is placed at its key.
func name(x *value, at pos) {
	x.keyPos = at
	if x.kind == kindArray && len(x.items) == 0 || x.pos.line == 0 {
		x.pos = at
	}
}

func joinParts(parts []keyPart) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	return strings.Join(names, ".")
}

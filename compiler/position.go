package compiler

// Finding where a diagnostic points: the key that names an object, keys
// looked up by path, and positions in raw bytes.

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

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

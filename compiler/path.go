package compiler

// Diagnostic paths: dot-separated keys from the document root with
// sequence items as [i].

import "github.com/skali-dev/studio/compiler/internal/check"

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
		s = check.Join(s, p.key)
	}
	if p.item > 0 {
		s = check.Index(s, p.item-1)
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

package recipe

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/internal/check"
)

// checker collects diagnostics about one TOML document.
type checker struct {
	diags []compiler.Diagnostic
}

func (c *checker) errorAt(p pos, path, msg string) {
	c.add(compiler.SeverityError, p, path, msg)
}

func (c *checker) warnAt(p pos, path, msg string) {
	c.add(compiler.SeverityWarning, p, path, msg)
}

func (c *checker) add(sev compiler.Severity, p pos, path, msg string) {
	if p.line == 0 {
		p = pos{1, 1}
	}
	c.diags = append(c.diags, compiler.Diagnostic{Severity: sev, Path: path, Line: p.line, Column: p.col, Message: msg})
}

// table is a checked TOML table: its value and path.
type table struct {
	v    *value
	path string
}

func (t table) get(k string) *value { return t.v.get(k) }

func (t table) at(k string) string { return check.Join(t.path, k) }

// where returns where a value is reported: scalars at the value, tables
// and arrays at the key that names them.
func where(v *value) pos {
	if v.kind == kindTable || v.kind == kindArray {
		return v.keyPos
	}
	return v.pos
}

// table checks that v is a table with only known keys; every unknown key
// is an error at the key, since this is the dry-run validation that
// "rejects any key the agent does not recognise".
func (c *checker) table(v *value, path string, known []string, hint string) (table, bool) {
	t := table{v: v, path: path}
	if v.kind != kindTable {
		msg := "expected a table, got " + v.kindName()
		if v.kind == kindArray && v.tableArray && hint != "" {
			msg += "; write `[" + hint + "]`, with single brackets"
		}
		c.errorAt(where(v), path, msg)
		return t, false
	}
	for _, k := range v.keys {
		if slices.Contains(known, k) {
			continue
		}
		msg := "unknown key `" + k + "`"
		if owner, ok := ownerTable(hint, k); ok {
			// The mistake TOML stays quiet about: a key written after a
			// sub-table's header belongs to that sub-table.
			msg += "; `" + k + "` belongs to " + owner + ", but keys after a `[" + hint + "]` header belong to that table: move it above the header"
		} else if len(known) > 0 {
			msg += check.Suggestion(k, known, "allowed keys")
		}
		c.errorAt(v.fields[k].keyPos, check.Join(path, k), msg)
	}
	return t, true
}

// tables checks an array of tables ([[name]]), returning its items.
func (c *checker) tables(v *value, path, header string) []*value {
	if v.kind != kindArray {
		msg := "expected an array of tables, got " + v.kindName()
		if v.kind == kindTable {
			msg += "; write `[[" + header + "]]`, with double brackets, for each entry"
		}
		c.errorAt(where(v), path, msg)
		return nil
	}
	var out []*value
	for i, it := range v.items {
		if it.kind != kindTable {
			c.errorAt(where(it), check.Index(path, i), "expected a table, got "+it.kindName())
			continue
		}
		out = append(out, it)
	}
	return out
}

// missing reports a required key at its parent: the table's header, or
// the key naming it (DESIGN.md: "a missing required key is reported at
// the line of its parent").
func (c *checker) missing(t table, k, what string) {
	c.errorAt(t.v.keyPos, t.at(k), check.Missing("key", k, what))
}

func (c *checker) str(v *value, path string) (string, bool) {
	if v.kind != kindString {
		c.errorAt(where(v), path, "expected a string, got "+v.kindName())
		return "", false
	}
	return v.str, true
}

func (c *checker) nonEmpty(v *value, path string) (string, bool) {
	s, ok := c.str(v, path)
	if ok && strings.TrimSpace(s) == "" {
		c.errorAt(v.pos, path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (c *checker) boolean(v *value, path string) (bool, bool) {
	if v.kind != kindBool {
		msg := "expected true or false, got " + v.kindName()
		if v.kind == kindString && (v.str == "true" || v.str == "false") {
			msg += "; write it without quotes"
		}
		c.errorAt(where(v), path, msg)
		return false, false
	}
	return v.boolV, true
}

func (c *checker) integer(v *value, path string, lo, hi int64) (int64, bool) {
	if v.kind != kindInteger {
		msg := "expected an integer, got " + v.kindName()
		if v.kind == kindString {
			if _, err := strconv.ParseInt(v.str, 10, 64); err == nil {
				msg += "; write it without quotes"
			}
		}
		c.errorAt(where(v), path, msg)
		return 0, false
	}
	if v.num < lo || v.num > hi {
		c.errorAt(v.pos, path, check.OutOfRange(lo, hi, v.num))
		return v.num, false
	}
	return v.num, true
}

func (c *checker) stringList(v *value, path string) ([]string, bool) {
	if v.kind != kindArray || v.tableArray {
		c.errorAt(where(v), path, "expected an array of strings, got "+definedAs(v))
		return nil, false
	}
	var out []string
	ok := true
	for i, it := range v.items {
		s, good := c.str(it, check.Index(path, i))
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

// stringTable checks a table of string values (env, labels, headers).
func (c *checker) stringTable(v *value, path string) {
	if v.kind != kindTable {
		c.errorAt(where(v), path, "expected a table of strings, got "+v.kindName())
		return
	}
	for _, k := range v.keys {
		c.str(v.fields[k], check.Join(path, k))
	}
}

// duration checks a duration string such as "10s", "1m" or "24h" and
// returns it; it must be longer than zero.
func (c *checker) duration(v *value, path string) (time.Duration, bool) {
	s, ok := c.str(v, path)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		c.errorAt(v.pos, path, "`"+s+"` is not a duration; write a number with a unit, such as \"30s\", \"10m\" or \"24h\"")
		return 0, false
	}
	if d <= 0 {
		c.errorAt(v.pos, path, "must be longer than zero")
		return 0, false
	}
	return d, true
}

func (c *checker) enum(v *value, path string, allowed []string) (string, bool) {
	s, ok := c.str(v, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		c.errorAt(v.pos, path, check.NotOneOf(s, allowed))
		return s, false
	}
	return s, true
}

// ownerTable finds the nearest enclosing table of header whose schema has
// key k, and names it as a header ("[lifecycle.run]", or "the top level").
func ownerTable(header, k string) (string, bool) {
	if header == "" {
		return "", false
	}
	for h := header; ; {
		i := strings.LastIndexByte(h, '.')
		if i < 0 {
			h = ""
		} else {
			h = h[:i]
		}
		if slices.Contains(tableKeys[h], k) {
			if h == "" {
				return "the top level", true
			}
			return "`[" + h + "]`", true
		}
		if h == "" {
			return "", false
		}
	}
}

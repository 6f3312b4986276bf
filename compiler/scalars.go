package compiler

// Readers of scalar values (strings, integers, booleans, enums, sizes,
// durations, CPU) that report a diagnostic at the value when it is wrong.

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

// scalarText returns the text of a scalar that is not null, or ok=false.
func scalarText(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", false
	}
	return n.Value, true
}

// str reads a string field. Numbers and booleans are refused: a field that
// expects text gets text.
func (c *checker) str(n *yaml.Node, path pathT) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		c.errorf(n, path, "expected a string, got "+kindName(n))
		return "", false
	}
	return n.Value, true
}

// nonEmptyStr reads a string field that must not be empty.
func (c *checker) nonEmptyStr(n *yaml.Node, path pathT) (string, bool) {
	s, ok := c.str(n, path)
	if ok && strings.TrimSpace(s) == "" {
		c.errorf(resolve(n), path, "must not be empty")
		return "", false
	}
	return s, ok
}

// integer reads an integer field.
func (c *checker) integer(n *yaml.Node, path pathT) (int64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		c.errorf(n, path, "expected an integer, got "+kindName(n))
		return 0, false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil {
		c.errorf(n, path, "integer `"+n.Value+"` is out of range")
		return 0, false
	}
	return v, true
}

// intRange reads an integer within [lo, hi].
func (c *checker) intRange(n *yaml.Node, path pathT, lo, hi int64, what string) (int, bool) {
	v, ok := c.integer(n, path)
	if !ok {
		return 0, false
	}
	if v < lo || v > hi {
		c.errorf(resolve(n), path, strconv.FormatInt(v, 10)+" is out of range; "+what)
		return 0, false
	}
	return int(v), true
}

// boolean reads a true/false field.
func (c *checker) boolean(n *yaml.Node, path pathT) (bool, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		c.errorf(n, path, "expected true or false, got "+kindName(n))
		return false, false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", true
}

// enum reads a string that must be one of allowed; the mistyped word is
// quoted because enum fields never carry secrets.
func (c *checker) enum(n *yaml.Node, path pathT, allowed []string) (string, bool) {
	n = resolve(n)
	s, ok := scalarText(n)
	if !ok || n.Kind != yaml.ScalarNode {
		c.errorf(n, path, "expected one of "+check.QuoteList(allowed)+", got "+kindName(n))
		return "", false
	}
	if slices.Contains(allowed, s) {
		return s, true
	}
	msg := "`" + s + "` is not allowed; expected " + check.QuoteList(allowed)
	if sug := check.Closest(s, allowed); sug != "" {
		msg += " (did you mean `" + sug + "`?)"
	}
	c.errorf(n, path, msg)
	return "", false
}

// byteSize reads a positive byte quantity.
func (c *checker) byteSize(n *yaml.Node, path pathT) (ByteSize, bool) {
	n = resolve(n)
	s, ok := scalarText(n)
	if !ok || n.ShortTag() != "!!str" {
		if ok && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			c.errorf(n, path, "`"+s+"` has no unit; write a byte quantity such as 256MB or 1GiB")
			return 0, false
		}
		c.errorf(n, path, "expected a byte quantity such as 256MB or 1GiB, got "+kindName(n))
		return 0, false
	}
	v, problem := parseByteSize(s)
	if problem != "" {
		c.errorf(n, path, "`"+s+"` "+problem)
		return 0, false
	}
	if v <= 0 {
		c.errorf(n, path, "`"+s+"` must be a positive byte quantity")
		return 0, false
	}
	return v, true
}

// duration reads a duration; positive requires it to be above zero.
func (c *checker) duration(n *yaml.Node, path pathT, positive bool) (time.Duration, bool) {
	n = resolve(n)
	s, ok := scalarText(n)
	if !ok || n.ShortTag() != "!!str" {
		if ok && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
			c.errorf(n, path, "`"+s+"` has no unit; write a duration such as 30s or 10m (units ms, s, m, h, d, w)")
			return 0, false
		}
		c.errorf(n, path, "expected a duration such as 30s or 10m, got "+kindName(n))
		return 0, false
	}
	d, problem := parseDuration(s)
	if problem != "" {
		c.errorf(n, path, "`"+s+"` "+problem)
		return 0, false
	}
	if positive && d <= 0 {
		c.errorf(n, path, "`"+s+"` must be longer than zero")
		return 0, false
	}
	return d, true
}

// cpu reads decimal cores given as a number or a string.
func (c *checker) cpu(n *yaml.Node, path pathT) (MilliCPU, bool) {
	n = resolve(n)
	s, ok := scalarText(n)
	tag := n.ShortTag()
	if !ok || (tag != "!!str" && tag != "!!int" && tag != "!!float") {
		c.errorf(n, path, "expected decimal CPU cores such as 0.25 or 1, got "+kindName(n))
		return 0, false
	}
	v, problem := parseCPU(s)
	if problem != "" {
		c.errorf(n, path, "`"+s+"` "+problem)
		return 0, false
	}
	return v, true
}

// secretScalar reads a string, number or boolean and converts it to text,
// without ever quoting it in a message.
func (c *checker) secretScalar(n *yaml.Node, p pathT, what string) (string, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
			// A plain date such as 2024-01-01 is a timestamp to YAML but
			// text to a build or an environment: keep it as written.
			return n.Value, true
		}
	}
	c.errorf(n, p, what+" values must be a string, number or boolean, got "+kindName(n))
	return "", false
}

// stringList returns the item nodes of a list, or nil after reporting a type
// error. A null value is an empty list.
func (c *checker) stringList(n *yaml.Node, p pathT) []*yaml.Node {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		c.errorf(n, p, "expected a list, got "+kindName(n))
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for i, it := range n.Content {
		it = resolve(it)
		if it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
			c.errorf(it, index(p, i), "expected a string, got "+kindName(it))
			continue
		}
		out = append(out, it)
	}
	return out
}

// argv reads an argv array. Scalars of any type are taken as their text so
// `[sleep, 10]` means what it says. nonEmpty requires at least one element.
func (c *checker) argv(n *yaml.Node, p pathT, nonEmpty bool) []string {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode && !(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		c.errorf(n, p, "expected an argv list such as [\"/app/web\", \"serve\"], got "+kindName(n)+"; commands run without a shell, use [sh, -c, \"...\"] when you need one")
		return nil
	}
	items := c.stringList(n, p)
	if nonEmpty && len(n.Content) == 0 {
		c.errorf(n, p, "must be a nonempty argv list")
		return nil
	}
	if len(items) == 0 {
		return nil
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

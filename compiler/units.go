package compiler

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a byte quantity. The manifest writes it with a decimal (KB, MB,
// ...) or binary (KiB, MiB, ...) suffix; the definition keeps only the byte
// count, so 1GB and 1000MB compile to the same definition.
type ByteSize int64

// String renders the size with the largest unit that divides it exactly.
func (b ByteSize) String() string {
	units := []struct {
		name   string
		factor int64
	}{
		{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9},
		{"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3},
	}
	for _, u := range units {
		if b != 0 && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MilliCPU is a CPU amount in thousandths of a core; the manifest allows at
// most three decimals, so this is exact.
type MilliCPU int64

// String renders the amount as decimal cores, as the manifest writes it.
func (m MilliCPU) String() string {
	s := strconv.FormatInt(int64(m)/1000, 10)
	if frac := int64(m) % 1000; frac != 0 {
		f := strings.TrimRight(strconv.FormatInt(1000+frac, 10)[1:], "0")
		s += "." + f
	}
	return s
}

var byteUnits = []struct {
	suffix string
	factor int64
}{
	// Longer suffixes first so "KiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// parseByteSize reads "256MB", "1.5GiB" or "100B". Bare suffixes such as
// "1G" are refused, as the reference says. The arithmetic is exact decimal
// arithmetic: 1.1KB is 1100 bytes, never a float rounding away from it.
func parseByteSize(s string) (ByteSize, string) {
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, whole, ok := scaleDecimal(num, u.factor)
		if !ok {
			break
		}
		if v < 0 {
			return 0, "is too large"
		}
		if !whole {
			return 0, "is not a whole number of bytes"
		}
		return ByteSize(v), ""
	}
	return 0, "is not a byte quantity; write a number with B, KB, MB, GB, TB (factor 1000) or KiB, MiB, GiB, TiB (factor 1024), such as 256MB or 1GiB"
}

// maxScaled bounds quantities so they stay far from overflow.
const maxScaled = math.MaxInt64 / 2

// scaleDecimal multiplies the decimal number s (digits with an optional
// fraction, nothing else: no sign, exponent, spaces or underscores) by
// factor exactly. ok is false when s is not such a number; v is -1 when the
// result exceeds maxScaled; whole is false when the product has a fraction.
func scaleDecimal(s string, factor int64) (v int64, whole, ok bool) {
	intPart, frac, hasDot := strings.Cut(s, ".")
	if !allDigits(intPart) || hasDot && !allDigits(frac) {
		return 0, false, false
	}
	if len(intPart)+len(frac) > 15 {
		return 0, false, false
	}
	// Trailing zeros of the fraction change nothing.
	frac = strings.TrimRight(frac, "0")
	n, _ := strconv.ParseInt(intPart+frac, 10, 64) // below 1e15
	den := uint64(1)
	for range len(frac) {
		den *= 10
	}
	hi, lo := bits.Mul64(uint64(n), uint64(factor))
	if hi != 0 || lo/den > maxScaled {
		return -1, true, true
	}
	return int64(lo / den), lo%den == 0, true
}

var durationUnits = []struct {
	suffix string
	factor time.Duration
}{
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute},
	{"h", time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour},
}

// parseDuration reads one number plus one of ms, s, m, h, d or w, exactly.
func parseDuration(s string) (time.Duration, string) {
	for _, u := range durationUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		// Count in milliseconds, the finest unit the manifest writes.
		v, whole, ok := scaleDecimal(num, int64(u.factor/time.Millisecond))
		if !ok {
			continue // "5ms" also ends in "s"; try the next unit
		}
		if v < 0 || v > maxScaled/int64(time.Millisecond) {
			return 0, "is too long"
		}
		if !whole {
			return 0, "is not a whole number of milliseconds"
		}
		return time.Duration(v) * time.Millisecond, ""
	}
	return 0, "is not a duration; write a number with ms, s, m, h, d or w, such as 30s or 10m"
}

// parseCPU reads decimal cores with at most three decimals into millicores.
func parseCPU(s string) (MilliCPU, string) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || !allDigits(whole) || (hasDot && (frac == "" || !allDigits(frac))) {
		return 0, "is not a CPU amount; write decimal cores such as 0.25 or 1"
	}
	if len(frac) > 3 && strings.TrimRight(frac[3:], "0") == "" {
		frac = frac[:3] // 0.2500 is 0.25: the value has at most three decimals
	}
	if len(frac) > 3 {
		return 0, "has more than three decimals; CPU is counted in thousandths of a core"
	}
	if len(whole) > 9 {
		return 0, "is too large"
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	m := w * 1000
	if frac != "" {
		f, _ := strconv.ParseInt((frac + "00")[:3], 10, 64)
		m += f
	}
	if m <= 0 {
		return 0, "must be positive"
	}
	return MilliCPU(m), ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

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
		c.errorf(n, path, "expected one of "+quoteList(allowed)+", got "+kindName(n))
		return "", false
	}
	if contains(allowed, s) {
		return s, true
	}
	msg := "`" + s + "` is not allowed; expected " + quoteList(allowed)
	if sug := closest(s, allowed); sug != "" {
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

// IsKey reports whether s matches ^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$, the
// shape of service, port, route, volume and command keys, of the project
// name, and of the Studio's environment names. Hand-written because it runs
// for every key.
func IsKey(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
			return false
		}
	}
	return s[len(s)-1] != '-'
}

// keyRule is the message for a key that fails IsKey.
const keyRule = "must start with a lowercase letter, contain only lowercase letters, digits and hyphens, not end with a hyphen, and be at most 63 characters"

// isEnvName reports whether s matches ^[A-Za-z_][A-Za-z0-9_]*$.
func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '_' || i > 0 && ch >= '0' && ch <= '9' {
			continue
		}
		return false
	}
	return true
}

// IsValueName reports whether s matches ^[A-Z_][A-Z0-9_]*$, the shape of a
// value's name in ${NAME} (and so of every value the Studio stores).
func IsValueName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'A' && ch <= 'Z' || ch == '_' || i > 0 && ch >= '0' && ch <= '9' {
			continue
		}
		return false
	}
	return true
}

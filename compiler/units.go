package compiler

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
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

// keyProblem is keyRule for key s, with its length when that is what is
// wrong ("has 78 characters; at most 63", as humanize.TooLong words it).
func keyProblem(s string) string {
	if len(s) > 63 {
		return "has " + strconv.Itoa(len(s)) + " characters; at most 63"
	}
	return keyRule
}

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

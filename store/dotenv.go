package store

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
)

// DotenvEntry is one NAME=value of a dotenv file, with the line it starts on.
type DotenvEntry struct {
	Name  string
	Value string
	Line  int
}

// ParseDotenv parses a dotenv file: blank lines and # comments, an optional
// `export ` prefix, NAME=value with spaces allowed around =, unquoted values
// (trimmed, ending at a # preceded by a space), single-quoted values
// (literal except \' and \\), and double-quoted values with the escapes \n
// \r \t \" \\ \$ that may span lines. There is no variable expansion: ${X}
// in a value stays as written. A name set twice is an error naming its lines.
//
// Errors are apperr.Invalid, name the line and never quote the text of the file:
// a malformed line may well be a secret pasted on its own.
//
// Every problem of the file is found at once: the error is a *DotenvError
// listing each one by line (its message, apperr.Invalid, says them all).
func ParseDotenv(src string) ([]DotenvEntry, error) {
	p := &dotenvParser{src: strings.ReplaceAll(strings.TrimPrefix(src, "\ufeff"), "\r\n", "\n"), line: 1}
	var out []DotenvEntry
	var problems []string
	for {
		p.skipBlank()
		if p.eof() {
			break
		}
		if p.peek() == '#' {
			p.skipLine()
			continue
		}
		e, err := p.entry()
		if err != nil {
			problems = append(problems, err.Error())
			// The rest of the line is skipped; an unclosed quote
			// took the rest of the file.
			p.skipLine()
			continue
		}
		out = append(out, e)
	}
	if len(problems) > 0 {
		// The entries read are returned too, so that a caller may add its
		// own problems of them to the list.
		return out, NewDotenvError(problems)
	}
	lines := map[string][]int{}
	var dups []string
	for _, e := range out {
		lines[e.Name] = append(lines[e.Name], e.Line)
		if len(lines[e.Name]) == 2 {
			dups = append(dups, e.Name)
		}
	}
	if len(dups) > 0 {
		sort.Strings(dups)
		var parts []string
		for _, n := range dups {
			var ls []string
			for _, l := range lines[n] {
				ls = append(ls, strconv.Itoa(l))
			}
			parts = append(parts, fmt.Sprintf("%s is set on lines %s", n, humanize.JoinAnd(ls)))
		}
		return nil, apperr.Errorf(apperr.Invalid, "Each name may appear once: %s. Remove the extra lines and import again; nothing was changed.", strings.Join(parts, "; "))
	}
	return out, nil
}

type dotenvParser struct {
	src  string
	pos  int
	line int
}

func (p *dotenvParser) eof() bool  { return p.pos >= len(p.src) }
func (p *dotenvParser) peek() byte { return p.src[p.pos] }

func (p *dotenvParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("Line %d: %s.", line, fmt.Sprintf(format, args...))
}

// DotenvError is every problem of a pasted .env file, one sentence each
// ("Line 3: …"), never quoting its text. It is apperr.Invalid.
type DotenvError struct {
	Problems []string
	err      *apperr.Error
}

// NewDotenvError is the error of problems.
func NewDotenvError(problems []string) *DotenvError {
	msg := strings.Join(problems, " ") + " Nothing was changed."
	return &DotenvError{Problems: problems, err: apperr.Errorf(apperr.Invalid, "%s", msg)}
}

func (e *DotenvError) Error() string { return e.err.Message }
func (e *DotenvError) Unwrap() error { return e.err }

// skipBlank skips whitespace including newlines.
func (p *dotenvParser) skipBlank() {
	for !p.eof() {
		switch p.peek() {
		case '\n':
			p.line++
		case ' ', '\t', '\r', '\f', '\v':
		default:
			return
		}
		p.pos++
	}
}

func (p *dotenvParser) skipSpaces() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.pos++
	}
}

func (p *dotenvParser) skipLine() {
	for !p.eof() && p.peek() != '\n' {
		p.pos++
	}
}

func isNameStart(c byte) bool {
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

func isNameByte(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

func (p *dotenvParser) entry() (DotenvEntry, error) {
	start := p.line
	if strings.HasPrefix(p.src[p.pos:], "export") && p.pos+6 < len(p.src) && (p.src[p.pos+6] == ' ' || p.src[p.pos+6] == '\t') {
		p.pos += 6
		p.skipSpaces()
	}
	from := p.pos
	if p.eof() || !isNameStart(p.peek()) {
		return DotenvEntry{}, p.errorf(start, "expected NAME=value, with a name of letters, digits and underscores")
	}
	for !p.eof() && isNameByte(p.peek()) {
		p.pos++
	}
	name := p.src[from:p.pos]
	if len(name) > MaxValueNameLength {
		return DotenvEntry{}, p.errorf(start, "the name has %s", humanize.TooLong(len(name), MaxValueNameLength))
	}
	p.skipSpaces()
	if p.eof() || p.peek() != '=' {
		return DotenvEntry{}, p.errorf(start, "expected NAME=value, with a name of letters, digits and underscores")
	}
	p.pos++
	p.skipSpaces()
	var value string
	var err error
	switch {
	case p.eof() || p.peek() == '\n':
		value = ""
	case p.peek() == '"':
		value, err = p.quoted('"', start)
	case p.peek() == '\'':
		value, err = p.quoted('\'', start)
	default:
		value = p.unquoted()
	}
	if err != nil {
		return DotenvEntry{}, err
	}
	if strings.IndexByte(value, 0) >= 0 {
		return DotenvEntry{}, p.errorf(start, "the value of %s contains a NUL byte, which cannot become an environment variable at deploy time", name)
	}
	return DotenvEntry{Name: name, Value: value, Line: start}, nil
}

func (p *dotenvParser) unquoted() string {
	from := p.pos
	end := -1
	for !p.eof() && p.peek() != '\n' {
		if p.peek() == '#' && (p.pos == from || p.src[p.pos-1] == ' ' || p.src[p.pos-1] == '\t') {
			end = p.pos
			p.skipLine()
			break
		}
		p.pos++
	}
	if end < 0 {
		end = p.pos
	}
	return strings.TrimRight(p.src[from:end], " \t\r")
}

func (p *dotenvParser) quoted(q byte, start int) (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for {
		if p.eof() {
			kind := "double"
			if q == '\'' {
				kind = "single"
			}
			return "", p.errorf(start, "the %s-quoted value that starts here is never closed", kind)
		}
		c := p.peek()
		switch {
		case c == q:
			p.pos++
			p.skipSpaces()
			if !p.eof() && p.peek() == '#' {
				p.skipLine()
			}
			if !p.eof() && p.peek() != '\n' && p.peek() != '\r' {
				return "", p.errorf(p.line, "unexpected text after the closing quote (put a # before a comment)")
			}
			return b.String(), nil
		case c == '\\' && p.pos+1 < len(p.src):
			next := p.src[p.pos+1]
			if q == '\'' {
				if next == '\'' || next == '\\' {
					b.WriteByte(next)
					p.pos += 2
					continue
				}
				b.WriteByte(c)
				p.pos++
				continue
			}
			switch next {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case '"', '\\', '$', '\'':
				b.WriteByte(next)
			case '\n':
				// A backslash at the end of a line continues it.
				p.line++
			default:
				b.WriteByte(c)
				b.WriteByte(next)
			}
			p.pos += 2
		default:
			if c == '\n' {
				p.line++
			}
			b.WriteByte(c)
			p.pos++
		}
	}
}

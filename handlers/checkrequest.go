package handlers

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeCheckRequest reads a check's body as json.Unmarshal reads it into a
// CheckRequest, and returns the manifest apart, as the bytes the compiler
// takes (req.Manifest is left empty).
//
// The body the editor sends (an object of CheckRequest's four fields, in
// any order, with a string or boolean each) is read in one pass that copies
// only the manifest, once: encoding/json validates the whole body, then
// decodes it, then the string is copied again into bytes, which came to a
// tenth of the production example's compile. Any other body, whatever is
// unusual in it (another key or spelling of one, a null, a \u escape of a
// surrogate, bytes that are not UTF-8) and every malformed one, goes to
// encoding/json, so what is accepted and refused, and how, stays exactly
// encoding/json's.
func decodeCheckRequest(body []byte) (manifest []byte, req CheckRequest, err error) {
	if m, r, ok := decodePlainCheckRequest(body); ok {
		return m, r, nil
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, CheckRequest{}, err
	}
	manifest = []byte(req.Manifest)
	req.Manifest = ""
	return manifest, req, nil
}

// decodePlainCheckRequest reads b when it is a JSON object whose keys are
// exactly CheckRequest's (written without escapes), its text fields strings
// and insecure_skip_verify true or false, with nothing but white space
// after it. ok is false for anything else; it then decodes nothing.
func decodePlainCheckRequest(b []byte) (manifest []byte, req CheckRequest, ok bool) {
	i := skipJSONSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, CheckRequest{}, false
	}
	i = skipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return []byte{}, req, skipJSONSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, CheckRequest{}, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 && b[j] < utf8.RuneSelf {
			j++
		}
		if j >= len(b) || b[j] != '"' {
			return nil, CheckRequest{}, false
		}
		key := b[i+1 : j]
		i = skipJSONSpace(b, j+1)
		if i >= len(b) || b[i] != ':' {
			return nil, CheckRequest{}, false
		}
		i = skipJSONSpace(b, i+1)
		switch string(key) {
		case "manifest", "kind", "filename":
			s, next, good := decodeJSONString(b, i)
			if !good {
				return nil, CheckRequest{}, false
			}
			switch string(key) {
			case "manifest":
				manifest = s
			case "kind":
				req.Kind = string(s)
			default:
				req.FileName = string(s)
			}
			i = next
		case "insecure_skip_verify":
			switch {
			case hasJSONLiteral(b, i, "true"):
				req.InsecureSkipVerify, i = true, i+len("true")
			case hasJSONLiteral(b, i, "false"):
				req.InsecureSkipVerify, i = false, i+len("false")
			default:
				return nil, CheckRequest{}, false
			}
		default:
			return nil, CheckRequest{}, false
		}
		i = skipJSONSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipJSONSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			break
		}
		return nil, CheckRequest{}, false
	}
	if skipJSONSpace(b, i+1) != len(b) {
		return nil, CheckRequest{}, false
	}
	if manifest == nil {
		manifest = []byte{}
	}
	return manifest, req, true
}

// skipJSONSpace returns the offset of the first byte at or after i that is
// not JSON white space.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// hasJSONLiteral reports whether lit is written at b[i:].
func hasJSONLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// decodeJSONString decodes the JSON string that starts at b[i] (its opening
// quote) into new bytes and returns the offset after its closing quote.
// ok is false where encoding/json would decide differently or refuse: a
// control character, an unknown escape, a \u escape of a surrogate (a pair
// or not), bytes that are not UTF-8 (encoding/json replaces them).
func decodeJSONString(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	start := i + 1
	// Find the closing quote first, so that the text is allocated once:
	// escapes only shorten it.
	end := start
	for end < len(b) && b[end] != '"' {
		if b[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(b) {
		return nil, 0, false
	}
	s = make([]byte, 0, end-start)
	for k := start; k < end; {
		c := b[k]
		switch {
		case c == '\\':
			e := b[k+1]
			k += 2
			switch e {
			case '"', '\\', '/':
				s = append(s, e)
			case 'n':
				s = append(s, '\n')
			case 't':
				s = append(s, '\t')
			case 'r':
				s = append(s, '\r')
			case 'b':
				s = append(s, '\b')
			case 'f':
				s = append(s, '\f')
			case 'u':
				r, good := hex4(b, k, end)
				if !good || r >= 0xD800 && r < 0xE000 {
					return nil, 0, false
				}
				s = utf8.AppendRune(s, r)
				k += 4
			default:
				return nil, 0, false
			}
		case c < 0x20:
			return nil, 0, false
		case c < utf8.RuneSelf:
			// A run of plain ASCII is copied at once.
			run := k + 1
			for run < end && b[run] >= 0x20 && b[run] < utf8.RuneSelf && b[run] != '\\' {
				run++
			}
			s = append(s, b[k:run]...)
			k = run
		default:
			r, size := utf8.DecodeRune(b[k:end])
			if r == utf8.RuneError && size == 1 {
				return nil, 0, false
			}
			s = append(s, b[k:k+size]...)
			k += size
		}
	}
	return s, end + 1, true
}

// hex4 reads the four hexadecimal digits of a \u escape at b[k:], which
// must end before end.
func hex4(b []byte, k, end int) (rune, bool) {
	if end-k < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[k : k+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

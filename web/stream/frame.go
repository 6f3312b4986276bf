package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/views"
)

// Frame encoding: one JSON text frame per event, the event's stored
// payload with seq, at and the fragments views rendered for it, built once
// per event and process.

// frame returns the websocket frame of an event, header included, built
// once per event and process (live events are shared by all subscribers):
// every watcher's writer sends the same bytes.
func (s *Server) frame(e *events.Event) []byte {
	b, _ := e.Memo(func() any { return s.buildFrame(e) }).([]byte)
	return b
}

func (s *Server) buildFrame(e *events.Event) []byte {
	var frags []views.Fragment
	var err error
	if e.Stream.Kind == events.RunEvents {
		// Rendered from the event's state alone, without a read: no
		// deadline to set up (a timer) for every event.
		frags, err = s.fragments.RunFragments(context.Background(), e.Stream.ID, e)
	} else {
		// An environment's may read its active release.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		frags, err = s.fragments.EnvironmentFragments(ctx, e.Stream.ID, e)
		cancel()
	}
	if err != nil {
		s.logger.Warn("event stream: render fragments", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
	}
	data, err := encodeFrame(e, frags)
	if err != nil {
		s.logger.Error("event stream: encode frame", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
		return nil
	}
	return appendTextFrame(make([]byte, 0, len(data)+10), data)
}

// appendTextFrame appends data as one unmasked websocket text frame (what a
// server sends, RFC 6455 section 5.2): what gorilla/websocket writes for a
// text message without compression, which the streams do not negotiate.
func appendTextFrame(b, data []byte) []byte {
	const finText = 0x80 | websocket.TextMessage
	switch n := len(data); {
	case n <= 125:
		b = append(b, finText, byte(n))
	case n <= 0xffff:
		b = append(b, finText, 126, byte(n>>8), byte(n))
	default:
		b = append(b, finText, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, data...)
}

// encodeFrame writes an event's frame: its stored payload (a JSON object,
// encoded by package payload) with seq, at and the fragments added. The payload
// is copied as it is, not decoded and encoded again: this runs for every
// event on the way to its watchers.
func encodeFrame(e *events.Event, frags []views.Fragment) ([]byte, error) {
	payload := bytes.TrimSpace(e.Payload)
	if len(payload) < 2 || payload[0] != '{' || payload[len(payload)-1] != '}' || !json.Valid(payload) {
		// Not an object: keep it under a name of its own.
		p := json.RawMessage(`null`)
		if json.Valid(payload) {
			p = payload
		}
		payload = fmt.Appendf(nil, `{"payload":%s}`, p)
	}
	// The payload's own fields first: a reader that meets a name twice
	// keeps the last, so seq, at and fragments are always the Studio's.
	body := bytes.TrimSpace(payload[1 : len(payload)-1])
	buf := make([]byte, 0, len(payload)+64+fragmentsSize(frags))
	buf = append(buf, '{')
	if len(body) > 0 {
		buf = append(buf, body...)
		buf = append(buf, ',')
	}
	buf = append(buf, `"seq":`...)
	buf = strconv.AppendInt(buf, e.Seq, 10)
	buf = append(buf, `,"at":"`...)
	buf = e.At.UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	if len(frags) > 0 {
		buf = appendFragments(append(buf, `,"fragments":`...), frags)
	}
	return append(buf, '}'), nil
}

// appendFragments appends frags as a JSON array of {"id", "html"} objects,
// byte for byte what encoding/json writes with SetEscapeHTML(false) (a
// fragment's markup travels as it is, not as \u003c and friends: the frame
// is never embedded in HTML), without reflection: this runs for every
// event.
func appendFragments(b []byte, frags []views.Fragment) []byte {
	b = append(b, '[')
	for i, f := range frags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, f.ID)
		b = append(b, `,"html":`...)
		b = appendJSONString(b, f.HTML)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string the way encoding/json does
// without HTML escaping: quote, backslash and control characters escaped
// (\b \f \n \r \t, the others as \u00XX), invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped, everything else as it is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func fragmentsSize(frags []views.Fragment) int {
	n := 0
	for _, f := range frags {
		n += len(f.ID) + len(f.HTML) + 32
	}
	return n
}

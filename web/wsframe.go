package web

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/skali-dev/studio/events"
)

// Frame encoding: one JSON text frame per event, the event's stored
// payload with seq, at and the fragments views rendered for it, built once
// per event and process.

// frame returns the websocket frame of an event, header included, built
// once per event and process (live events are shared by all subscribers):
// every watcher's writer sends the same bytes.
func (s *streams) frame(e *events.Event) []byte {
	b, _ := e.Memo(func() any { return s.buildFrame(e) }).([]byte)
	return b
}

func (s *streams) buildFrame(e *events.Event) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var frags []Fragment
	var err error
	if e.Stream.Kind == events.RunEvents {
		frags, err = s.fragments.RunFragments(ctx, e.Stream.ID, e)
	} else {
		frags, err = s.fragments.EnvironmentFragments(ctx, e.Stream.ID, e)
	}
	if err != nil {
		s.a.logger.Warn("event stream: render fragments", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
	}
	data, err := encodeFrame(e, frags)
	if err != nil {
		s.a.logger.Error("event stream: encode frame", "stream", e.Stream.Kind.String(), "id", e.Stream.ID, "seq", e.Seq, "err", err)
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
func encodeFrame(e *events.Event, frags []Fragment) ([]byte, error) {
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
		// Not escaped for embedding in HTML (the frame never is): a
		// fragment's markup travels as it is, not as \u003c and friends.
		w := bytes.NewBuffer(append(buf, `,"fragments":`...))
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(frags); err != nil {
			return nil, err
		}
		buf = bytes.TrimRight(w.Bytes(), "\n")
	}
	return append(buf, '}'), nil
}

func fragmentsSize(frags []Fragment) int {
	n := 0
	for _, f := range frags {
		n += len(f.ID) + len(f.HTML) + 32
	}
	return n
}

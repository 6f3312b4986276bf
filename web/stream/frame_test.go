package stream

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/skali-dev/studio/events"
	"github.com/skali-dev/studio/views"
)

// A frame is the event's stored payload with seq, at and the fragments
// added; whatever the payload holds, the frame is one valid JSON object
// whose seq, at and fragments are the Studio's.
func TestEncodeFrameKeepsThePayloadAndAddsSeqAtAndFragments(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 3, 0, 123000000, time.FixedZone("CET", 3600))
	frags := []views.Fragment{{ID: "checkpoint-3", HTML: `<tr id="checkpoint-3"><td>a & "b"</td></tr>`}}
	cases := []struct {
		name    string
		payload string
		frags   []views.Fragment
		want    map[string]any
	}{
		{
			name:    "run and checkpoint",
			payload: `{"run": {"status": "running"}, "checkpoint": {"position": 3, "status": "deferred", "warning": "TLS deferred"}}`,
			frags:   frags,
			want: map[string]any{
				"seq": 7.0, "at": "2026-11-30T13:03:00.123Z",
				"run":        map[string]any{"status": "running"},
				"checkpoint": map[string]any{"position": 3.0, "status": "deferred", "warning": "TLS deferred"},
				"fragments":  []any{map[string]any{"id": "checkpoint-3", "html": `<tr id="checkpoint-3"><td>a & "b"</td></tr>`}},
			},
		},
		{
			name:    "empty object, no fragments",
			payload: ` {} `,
			want:    map[string]any{"seq": 7.0, "at": "2026-11-30T13:03:00.123Z"},
		},
		{
			name:    "payload naming seq and fragments itself",
			payload: `{"seq": 99, "fragments": "x", "type": "run.finished"}`,
			frags:   frags,
			want: map[string]any{
				"seq": 7.0, "at": "2026-11-30T13:03:00.123Z", "type": "run.finished",
				"fragments": []any{map[string]any{"id": "checkpoint-3", "html": `<tr id="checkpoint-3"><td>a & "b"</td></tr>`}},
			},
		},
		{
			name:    "not an object",
			payload: `[1, 2]`,
			want:    map[string]any{"seq": 7.0, "at": "2026-11-30T13:03:00.123Z", "payload": []any{1.0, 2.0}},
		},
		{
			name:    "not JSON",
			payload: `{"run": `,
			want:    map[string]any{"seq": 7.0, "at": "2026-11-30T13:03:00.123Z", "payload": nil},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &events.Event{Stream: events.RunStream(1), Seq: 7, At: at, Payload: json.RawMessage(c.payload)}
			data, err := encodeFrame(e, c.frags)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("frame %s is not JSON: %v", data, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("frame %s\ndecodes to %v\nwant       %v", data, got, c.want)
			}
		})
	}
}

// The fragments go out byte for byte as encoding/json (without HTML
// escaping) writes them, whatever the markup holds: quotes, control
// characters, invalid UTF-8, line and paragraph separators.
func TestFrameFragmentsAreWhatEncodingJSONWrites(t *testing.T) {
	frags := []views.Fragment{
		{ID: "run-header", HTML: `<h1 class="x">a & b < c > d</h1>`},
		{ID: "q\"uote\\", HTML: "tab\there\nnew\r\b\f\x00\x1f\x7f é ü 日本 \u2028 \u2029 end"},
		{ID: "bad-utf8", HTML: "a\xffb\xc3(c\xed\xa0\x80d"},
		{ID: "", HTML: ""},
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(frags); err != nil {
		t.Fatal(err)
	}
	got := appendFragments(nil, frags)
	if w := bytes.TrimRight(want.Bytes(), "\n"); !bytes.Equal(got, w) {
		t.Errorf("fragments encode as\n%s\nwant (encoding/json)\n%s", got, w)
	}
}

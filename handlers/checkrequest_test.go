package handlers

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// checkBodies are bodies a check may receive: what the editor sends, what
// other clients might, and malformed ones.
var checkBodies = []string{
	`{"manifest":"name: shop\napplications:\n  web:\n    image: nginx\n","kind":"skali","filename":"","insecure_skip_verify":false}`,
	`{"manifest":"a\r\nb\r\n","kind":"","filename":"skali.yaml","insecure_skip_verify":true}`,
	` { "kind" : "plan" , "manifest" : "components = []" } `,
	`{"manifest":"\u00e9t\u00e9 \"quoted\" \\ \/ \b\f\t caf` + "\u00e9 \u2028 \U0001F600" + `"}`,
	`{"manifest":"\u003cscript\u003e \u0026 \u0000"}`,
	`{"manifest":"one","manifest":"two"}`,
	`{}`,
	`{"manifest":null}`,
	`null`,
	`{"Manifest":"case differs"}`,
	`{"manifest":"x","extra":[1,{"a":2}]}`,
	`{"manifest":"\ud83d\ude00 a pair"}`,
	`{"manifest":"\ud83d alone"}`,
	"{\"manifest\":\"bad \xff byte\"}",
	"{\"manifest\":\"raw\nline\"}",
	`{"manifest":"bad \q escape"}`,
	`{"manifest":"\u12G4"}`,
	`{"manifest":1}`,
	`{"insecure_skip_verify":"true"}`,
	`{"insecure_skip_verify":truex}`,
	`{"manifest":"x",}`,
	`{"manifest":"x"} {}`,
	`{"manifest":"x"`,
	`{"manifest":"x\"}`,
	`{"manifest":"x\`,
	`{"manife\u0073t":"escaped key"}`,
	`{`,
	``,
	`[]`,
}

// TestDecodeCheckRequestAgreesWithEncodingJSON: the check reads its body
// exactly as encoding/json reads it into a CheckRequest (the same fields,
// the same refusals), and takes its one-pass path for what the editor
// sends.
func TestDecodeCheckRequestAgreesWithEncodingJSON(t *testing.T) {
	for _, body := range checkBodies {
		assertDecodesAsEncodingJSON(t, []byte(body))
	}
	example, err := os.ReadFile("../compiler/testdata/production.skali.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []CheckRequest{
		{Manifest: string(example), Kind: "skali"},
		{Manifest: "name: <shop> & co\r\n\ttab: \"x\"\n", FileName: "skali.yaml", InsecureSkipVerify: true},
	} {
		body, _ := json.Marshal(req)
		assertDecodesAsEncodingJSON(t, body)
		if _, _, ok := decodePlainCheckRequest(body); !ok {
			t.Errorf("the editor's body %.80s… took encoding/json's path", body)
		}
	}
}

func assertDecodesAsEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	var want CheckRequest
	wantErr := json.Unmarshal(body, &want)
	manifest, got, err := decodeCheckRequest(body)
	if (err != nil) != (wantErr != nil) {
		t.Errorf("%q: error %v, encoding/json's %v", body, err, wantErr)
		return
	}
	if err != nil {
		return
	}
	if !bytes.Equal(manifest, []byte(want.Manifest)) || got.Manifest != "" {
		t.Errorf("%q: manifest %q, encoding/json's %q", body, manifest, want.Manifest)
	}
	want.Manifest = ""
	if got != want {
		t.Errorf("%q: %+v, encoding/json's %+v", body, got, want)
	}
}

// FuzzDecodeCheckRequest: for any body, the check's decoding and
// encoding/json's agree.
func FuzzDecodeCheckRequest(f *testing.F) {
	for _, body := range checkBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		assertDecodesAsEncodingJSON(t, body)
	})
}

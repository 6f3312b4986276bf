package compiler_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/skali-dev/studio/compiler"
)

// DESIGN.md, "The CLI contract of studio validate": "The hash is of the
// canonical compiled definition: key order, comments, formatting and the
// client-only commands and dev blocks do not change it; any deployed change
// does." These tests rewrite the four reference examples systematically:
// every formatting rewrite must keep the hash and the value contract, and
// every single deployed scalar changed to another valid value must change
// the hash.

func copyNode(n *yaml.Node) *yaml.Node {
	m := *n
	m.Content = make([]*yaml.Node, len(n.Content))
	for i, ch := range n.Content {
		m.Content[i] = copyNode(ch)
	}
	return &m
}

func encodeNode(t *testing.T, n *yaml.Node) []byte {
	t.Helper()
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(2)
	if err := e.Encode(n); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func walkNodes(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	for _, ch := range n.Content {
		walkNodes(ch, f)
	}
}

func shufflePairs(rng *rand.Rand) func(*yaml.Node) {
	return func(n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			return
		}
		pairs := make([][2]*yaml.Node, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			pairs = append(pairs, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
		}
		rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		n.Content = n.Content[:0]
		for _, p := range pairs {
			n.Content = append(n.Content, p[0], p[1])
		}
	}
}

func TestHashIgnoresFormatting(t *testing.T) {
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			src := readExample(t, name)
			base := mustCompile(t, string(src))
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			variants := map[string][]byte{
				"CRLF line endings": bytes.ReplaceAll(src, []byte("\n"), []byte("\r\n")),
				"document markers":  append(append([]byte("---\n"), src...), "...\n"...),
				"schema comment":    append([]byte("# yaml-language-server: $schema=https://skali.dev/schemas/v1/skali.schema.json\n"), src...),
				"trailing spaces":   bytes.ReplaceAll(src, []byte("\n"), []byte("  \n")),
			}
			rewrite := func(what string, f func(*yaml.Node)) {
				d := copyNode(&doc)
				walkNodes(d, f)
				variants[what] = encodeNode(t, d)
			}
			for seed := range int64(8) {
				rewrite(fmt.Sprint("keys shuffled at every level, seed ", seed), shufflePairs(rand.New(rand.NewSource(seed))))
			}
			rewrite("flow style everywhere", func(n *yaml.Node) {
				if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
					n.Style = yaml.FlowStyle
				}
			})
			for _, st := range []yaml.Style{0, yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle, yaml.LiteralStyle, yaml.FoldedStyle} {
				rewrite(fmt.Sprint("string values in style ", st), func(n *yaml.Node) {
					if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
						n.Style = st
					}
				})
				rewrite(fmt.Sprint("keys in style ", st), func(n *yaml.Node) {
					if n.Kind == yaml.MappingNode {
						for i := 0; i < len(n.Content); i += 2 {
							n.Content[i].Style = st
						}
					}
				})
			}
			rewrite("explicit tags", func(n *yaml.Node) {
				if n.Kind == yaml.ScalarNode {
					n.Style |= yaml.TaggedStyle
				}
			})
			rewrite("comments with expression-like text", func(n *yaml.Node) {
				if n.Kind != yaml.MappingNode {
					return
				}
				for i := 0; i+1 < len(n.Content); i += 2 {
					n.Content[i].HeadComment = "# ${COMMENTED} {{databases.none.url}} ${"
					if n.Content[i+1].Kind == yaml.ScalarNode {
						n.Content[i+1].LineComment = "# ${ALSO_COMMENTED}"
					}
				}
			})
			rewrite("client-only blocks added or replaced", func(n *yaml.Node) {
				if n.Kind != yaml.MappingNode {
					return
				}
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value != "applications" {
						continue
					}
					apps := n.Content[i+1]
					for j := 1; j < len(apps.Content); j += 2 {
						app := apps.Content[j]
						kept := app.Content[:0]
						for k := 0; k+1 < len(app.Content); k += 2 {
							if v := app.Content[k].Value; v != "commands" && v != "dev" {
								kept = append(kept, app.Content[k], app.Content[k+1])
							}
						}
						var extra yaml.Node
						if err := yaml.Unmarshal([]byte("commands: {other: [sh, -c, \"echo ${DEV_ONLY}\"]}\ndev: {command: [run, \"${PORT}\", \"${DEV_ONLY:-x}\"]}\n"), &extra); err != nil {
							t.Fatal(err)
						}
						app.Content = append(kept, extra.Content[0].Content...)
					}
				}
			})
			for what, v := range variants {
				res := compiler.Compile(v)
				if !res.Valid() {
					t.Errorf("%s: invalid:\n%s\n%s", what, messages(res), v)
					continue
				}
				if res.Hash != base.Hash {
					t.Errorf("%s: hash changed\n%s", what, v)
				}
				if fmt.Sprint(res.Values) != fmt.Sprint(base.Values) {
					t.Errorf("%s: values %v, want %v", what, res.Values, base.Values)
				}
			}
		})
	}
}

// scalarLeaf is one scalar of a manifest with its dotted path.
type scalarLeaf struct {
	path string
	node *yaml.Node
}

func scalarLeaves(n *yaml.Node, path string, out *[]scalarLeaf) {
	switch n.Kind {
	case yaml.DocumentNode:
		scalarLeaves(n.Content[0], path, out)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			scalarLeaves(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i, ch := range n.Content {
			scalarLeaves(ch, path+"["+strconv.Itoa(i)+"]", out)
		}
	case yaml.ScalarNode:
		*out = append(*out, scalarLeaf{path, n})
	}
}

var alternativeWords = map[string][]string{
	"protocol": {"http", "https", "tcp"}, "tls": {"automatic", "optional", "disabled"},
	"strategy": {"round-robin", "least-requests", "blue-green", "recreate"},
	"across":   {"nodes", "zones"}, "enforcement": {"preferred", "required"},
	"isolation": {"shared", "project", "dedicated"}, "availability": {"single", "asynchronous", "synchronous"},
	"visibility": {"private", "public-read"}, "version": {"17", "18"}, "compress": {"true", "false"},
	"extensions": {"hstore", "ltree"}, "allowedMethods": {"POST", "DELETE"},
}

// alternatives proposes other values for a scalar, most specific first.
func alternatives(path string, n *yaml.Node) []string {
	field := path[strings.LastIndexByte(path, '.')+1:]
	if i := strings.IndexByte(field, '['); i >= 0 {
		field = field[:i]
	}
	s := n.Value
	out := append([]string(nil), alternativeWords[field]...)
	if i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i != 0 {
		if i < 0 {
			i = len(s)
		}
		if f, err := strconv.ParseFloat(s[:i], 64); err == nil {
			out = append(out, strconv.FormatFloat(f+1, 'f', -1, 64)+s[i:], strconv.FormatFloat(f/2, 'f', -1, 64)+s[i:])
		}
	}
	if n.ShortTag() == "!!bool" {
		out = append(out, strconv.FormatBool(s != "true"))
	}
	switch field {
	case "domain", "aliases":
		out = append(out, "x."+s)
	case "port":
		out = append(out, "9999")
	case "path", "mountPath", "context", "dockerfile":
		out = append(out, s+"/x")
	}
	for _, o := range []string{"internal_endpoint", "endpoint", "secret_key", "access_key", "host", "region"} {
		if strings.HasPrefix(s, "{{") {
			out = append(out, s[:strings.LastIndexByte(s, '.')+1]+o+"}}")
		}
	}
	out = append(out, s+"x")
	return out
}

func TestHashChangesWithEveryDeployedScalar(t *testing.T) {
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			src := readExample(t, name)
			base := mustCompile(t, string(src))
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			var leaves []scalarLeaf
			scalarLeaves(&doc, "", &leaves)
			for li, l := range leaves {
				if strings.Contains(l.path, ".commands.") || strings.Contains(l.path, ".dev.") {
					continue
				}
				changed := false
				for _, alt := range alternatives(l.path, l.node) {
					if alt == l.node.Value {
						continue
					}
					d := copyNode(&doc)
					var ls []scalarLeaf
					scalarLeaves(d, "", &ls)
					ls[li].node.Value, ls[li].node.Tag, ls[li].node.Style = alt, "", yaml.DoubleQuotedStyle
					if _, err := strconv.ParseFloat(alt, 64); err == nil || alt == "true" || alt == "false" {
						ls[li].node.Style = 0
					}
					res := compiler.Compile(encodeNode(t, d))
					if !res.Valid() {
						continue
					}
					changed = true
					if res.Hash == base.Hash {
						t.Errorf("%s: %q -> %q keeps the hash", l.path, l.node.Value, alt)
					}
					break
				}
				if !changed && l.path != "databases.data.engine" && !strings.HasSuffix(l.path, "rollout.strategy") && !strings.Contains(l.path, "platforms[") {
					t.Errorf("%s: no valid alternative to %q found; extend alternatives", l.path, l.node.Value)
				}
			}
		})
	}
}

package compiler

// Checks of the reference section "Build and image": the build block and
// its project-relative paths (image references are in image.go).

import (
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// build checks a source build.
func (c *checker) build(n *yaml.Node, p pathT) *Build {
	o, ok := c.object(n, p, buildFields)
	if !ok {
		return nil
	}
	b := &Build{Dockerfile: "Dockerfile"}
	if n := o.get("context"); n == nil {
		c.missing(o, "context", "the build context relative to the project root, such as `.`")
	} else if s, ok := c.nonEmptyStr(n, o.at("context")); ok {
		if clean, problem := projectPath(s); problem != "" {
			c.errorf(n, o.at("context"), "build context `"+s+"` "+problem)
		} else {
			b.Context = clean
		}
	}
	if n := o.get("dockerfile"); n != nil {
		if s, ok := c.nonEmptyStr(n, o.at("dockerfile")); ok {
			if isAbsolute(s) {
				c.errorf(n, o.at("dockerfile"), "dockerfile `"+s+"` must be relative to the build context, not absolute")
			} else if b.Context != "" {
				if _, problem := projectPath(path.Join(b.Context, s)); problem != "" {
					c.errorf(n, o.at("dockerfile"), "dockerfile `"+s+"` leaves the project root; it may step out of the context with .. but must stay inside the project")
				}
			}
			// Cleaned like the context, so ./Dockerfile and Dockerfile
			// compile alike.
			b.Dockerfile = path.Clean(strings.ReplaceAll(s, `\`, "/"))
		}
	}
	if n := o.get("target"); n != nil {
		if s, ok := c.nonEmptyStr(n, o.at("target")); ok {
			b.Target = s
		}
	}
	if n := o.get("arguments"); n != nil {
		ap := o.at("arguments")
		fs, _ := c.entries(n, ap)
		for _, f := range fs {
			kp := join(ap, f.key.Value)
			if f.key.Value == "" || strings.ContainsAny(f.key.Value, "= \t\r\n") {
				c.errorf(f.key, kp, "build argument name `"+f.key.Value+"` must be nonempty without `=` or whitespace")
				continue
			}
			// Never quote the value: people paste credentials here by mistake.
			v, ok := c.secretScalar(f.val, kp, "build argument")
			if !ok {
				continue
			}
			if b.Arguments == nil {
				b.Arguments = map[string]string{}
			}
			b.Arguments[f.key.Value] = v
		}
	}
	return b
}

func isAbsolute(s string) bool {
	return strings.HasPrefix(s, "/") || strings.HasPrefix(s, `\`) ||
		len(s) >= 2 && s[1] == ':' && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// projectPath cleans a path relative to the project root, refusing absolute
// paths and paths that escape the root.
func projectPath(s string) (string, string) {
	if isAbsolute(s) {
		return "", "must be relative to the project root, not absolute"
	}
	if hasControl(s) {
		return "", "must not contain control characters"
	}
	clean := path.Clean(strings.ReplaceAll(s, `\`, "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", "escapes the project root"
	}
	return clean, ""
}

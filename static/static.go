// Package static holds the Studio's CSS, JavaScript and icons, embedded in
// the binary and served under content-hashed names so that browsers may cache
// them forever: a changed file gets a new name.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed css js icons
var files embed.FS

// Prefix is the URL path under which assets are served.
const Prefix = "/static/"

type asset struct {
	data        []byte
	contentType string
}

type index struct {
	byName   map[string]string // "css/app.css" -> "/static/css/app.3f9c1a2b.css"
	byHashed map[string]asset  // "css/app.3f9c1a2b.css" -> content
}

var load = sync.OnceValue(func() *index {
	ix := &index{byName: map[string]string{}, byHashed: map[string]asset{}}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		ext := path.Ext(p)
		hashed := strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		ix.byName[p] = Prefix + hashed
		ct := mime.TypeByExtension(ext)
		if ct == "" {
			ct = "application/octet-stream"
		}
		ix.byHashed[hashed] = asset{data: data, contentType: ct}
		return nil
	})
	return ix
})

// Path returns the content-hashed URL of the asset name ("css/app.css").
// An unknown name returns a path that answers 404, so a typo shows up as a
// broken asset in the browser rather than a panic.
func Path(name string) string {
	if p, ok := load().byName[name]; ok {
		return p
	}
	return Prefix + "missing/" + name
}

// Handler serves the hashed assets with immutable, year-long cache headers.
// Mount it under Prefix with the prefix stripped.
func Handler() http.Handler {
	ix := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := ix.byHashed[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(a.data)
	})
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// filesHandler serves the files of dir (TESTAPP_DATA, a volume): PUT
// /files/NAME writes one (folders made as needed), DELETE /files/NAME
// removes it, GET /files lists every file as "NAME SIZE SHA256", sorted.
// Tests prove with it what a volume holds, through the application.
func filesHandler(dir string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if dir == "" {
			http.Error(w, "TESTAPP_DATA is not set", http.StatusNotFound)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/files/")
		if r.Method != http.MethodGet && (name == "" || !fs.ValidPath(name)) {
			http.Error(w, "bad file name", http.StatusBadRequest)
			return
		}
		switch r.Method {
		case http.MethodPut:
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			f, err := os.Create(p)
			if err == nil {
				_, err = io.Copy(f, r.Body)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case http.MethodDelete:
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		case http.MethodGet:
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				h := sha256.New()
				n, err := io.Copy(h, f)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				fmt.Fprintf(w, "%s %d %s\n", filepath.ToSlash(rel), n, hex.EncodeToString(h.Sum(nil)))
				return nil
			})
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	}
}

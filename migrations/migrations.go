// Package migrations holds the numbered SQL migrations of the Studio's
// database. They are embedded in the binary and applied in order by
// store.Migrate. A migration that has landed is never edited: add a new one.
package migrations

import "embed"

// FS holds every migration, named NNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

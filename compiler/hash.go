package compiler

import (
	"crypto/sha256"
	"encoding/hex"
)

// Canonical returns the canonical serialisation of the definition that Hash
// is computed over: JSON with struct fields in declaration order and map
// keys sorted, defaults applied, sets sorted, durations in nanoseconds and
// byte quantities in bytes. Equal deployments give equal bytes.
func (d *Definition) Canonical() []byte {
	if d == nil {
		return []byte("null")
	}
	w := canonicalWriter{b: make([]byte, 0, 2048), first: make([]bool, 0, 8)}
	w.definition(d)
	return w.b
}

// Hash returns "sha256:<hex>" of Canonical().
func (d *Definition) Hash() string {
	sum := sha256.Sum256(d.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

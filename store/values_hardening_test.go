package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/store"
)

// TestConcurrentFirstWritesKeepEveryVersion: 20 writers each set a name
// that does not exist yet 25 times, half through single sets and half
// through imports. Every write must get its own version: the value ends at
// version 500 and the audit log records versions 1 to 500 once each.
func TestConcurrentFirstWritesKeepEveryVersion(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	c := compiler.ValueContract{Required: []string{"NEW_NAME"}}
	const writers, writes = 20, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range writes {
				value := fmt.Sprintf("w%d-%d", w, i)
				var err error
				if w%2 == 0 {
					_, err = f.vault.SetValue(ctx, f.actor, f.env, "NEW_NAME", value)
				} else {
					_, err = f.vault.ImportValues(ctx, f.actor, f.env, c, []store.DotenvEntry{{Name: "NEW_NAME", Value: value, Line: 1}})
				}
				if err != nil {
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stored, err := f.db.StoredValues(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Version != writers*writes {
		t.Fatalf("stored = %+v, want NEW_NAME at version %d", stored, writers*writes)
	}
	rows, err := f.db.Pool.Query(ctx, `
		SELECT (detail->>'version')::int FROM audit_events WHERE action = 'value.set' AND target = 'NEW_NAME'
		UNION ALL
		SELECT (c->>'version')::int FROM audit_events, jsonb_array_elements(detail->'changed') c
		WHERE action = 'values.imported' AND c->>'name' = 'NEW_NAME'`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		seen[v]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= writers*writes; v++ {
		if seen[v] != 1 {
			t.Errorf("version %d is recorded %d times in the audit log, want once", v, seen[v])
		}
	}
	if len(seen) != writers*writes {
		t.Errorf("the audit log records %d distinct versions, want %d", len(seen), writers*writes)
	}
}

// TestValueNamesAndValuesAreBounded: names are at most 255 characters and
// values hold no NUL byte, in single sets and imports alike; the errors say
// what is wrong without quoting the input, and nothing is stored.
func TestValueNamesAndValuesAreBounded(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	for _, n := range []int{256, 2800, 100000} {
		name := strings.Repeat("N", n)
		_, err := f.vault.SetValue(ctx, f.actor, f.env, name, "x")
		if apperr.CodeOf(err) != apperr.Invalid {
			t.Errorf("a name of %d characters: error code %q, want invalid", n, apperr.CodeOf(err))
		}
		if err != nil && strings.Contains(err.Error(), strings.Repeat("N", 64)) {
			t.Errorf("the error for a name of %d characters quotes the name", n)
		}
	}
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, strings.Repeat("N", 255), "x"); err != nil {
		t.Errorf("a name of 255 characters: %v, want it stored", err)
	}
	if _, err := f.vault.SetValue(ctx, f.actor, f.env, "WITH_NUL", "a\x00b"); apperr.CodeOf(err) != apperr.Invalid {
		t.Errorf("a value with a NUL byte: error code %q, want invalid", apperr.CodeOf(err))
	}
	for _, v := range []string{"line one\nline two", "bell\x07 and tab\t", ""} {
		if _, err := f.vault.SetValue(ctx, f.actor, f.env, "MULTI", v); err != nil {
			t.Errorf("a value with control characters or newlines was refused: %v", err)
		}
	}

	_, err := store.ParseDotenv("OK=1\n" + strings.Repeat("L", 300) + "=x\n")
	if msg := apperr.Message(err); !strings.Contains(msg, "Line 2") || !strings.Contains(msg, "255") || strings.Contains(msg, strings.Repeat("L", 32)) {
		t.Errorf("import of a 300-character name: %q, want line 2 and the limit, without the name", msg)
	}
	_, err = store.ParseDotenv("OK=1\nSECRET=\"a\\\nb\"\nBAD=\"x\x00y\"\n")
	if msg := apperr.Message(err); !strings.Contains(msg, "Line 4") || !strings.Contains(msg, "NUL") {
		t.Errorf("import of a NUL byte: %q, want line 4 and NUL named", msg)
	}
	stored, err := f.db.StoredValues(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range stored {
		names = append(names, fmt.Sprintf("%.8s(%d)", s.Name, len(s.Name)))
	}
	if got := strings.Join(names, " "); got != "MULTI(5) NNNNNNNN(255)" {
		t.Errorf("stored = %s, want only MULTI and the 255-character name", got)
	}
}

// BenchmarkImport10000 imports a 10,000-line .env file into an environment
// that has every name already, once with every value changed and once with
// nothing changed. Goal: at most a second each on the development machine.
func BenchmarkImport10000(b *testing.B) {
	const n = 10000
	f := newValuesFixtureTB(b)
	ctx := context.Background()
	c := compiler.ValueContract{Optional: map[string]string{}}
	var src strings.Builder
	for i := range n {
		name := fmt.Sprintf("VALUE_%05d", i)
		c.Optional[name] = ""
		fmt.Fprintf(&src, "%s=value-%d-%s\n", name, i, strings.Repeat("x", 40))
	}
	entries, err := store.ParseDotenv(src.String())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.vault.ImportValues(ctx, f.actor, f.env, c, entries); err != nil {
		b.Fatal(err)
	}
	b.Run("changed", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			changed := make([]store.DotenvEntry, len(entries))
			for j, e := range entries {
				e.Value = fmt.Sprintf("%s-%d", e.Value, i)
				changed[j] = e
			}
			res, err := f.vault.ImportValues(ctx, f.actor, f.env, c, changed)
			if err != nil || len(res.Changed) != n {
				b.Fatalf("changed import: %d changed, %v", len(res.Changed), err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		cur, err := f.vault.ResolveValuesForDeploy(ctx, f.env.ID)
		if err != nil {
			b.Fatal(err)
		}
		same := make([]store.DotenvEntry, len(entries))
		for j, e := range entries {
			e.Value = cur[e.Name]
			same[j] = e
		}
		for b.Loop() {
			res, err := f.vault.ImportValues(ctx, f.actor, f.env, c, same)
			if err != nil || len(res.Unchanged) != n {
				b.Fatalf("unchanged import: %d unchanged, %v", len(res.Unchanged), err)
			}
		}
	})
}

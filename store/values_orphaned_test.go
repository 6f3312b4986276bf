package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skali-dev/studio/store"
)

// TestOrphanedValuesPagesAndCountsMatchTheFullList: what a deploy plan and
// the values page read now (the referenced names that are set, the
// orphaned ones counted and read a page at a time) is what they computed
// before from every stored name: the same names, in the same order, the
// same count, with a filter too; deleted values and another environment's
// values are not among them (issue 41).
func TestOrphanedValuesPagesAndCountsMatchTheFullList(t *testing.T) {
	f := newValuesFixture(t)
	ctx := context.Background()
	set := func(env *store.Environment, n string) {
		t.Helper()
		if _, err := f.vault.SetValue(ctx, f.actor, env, n, "x"); err != nil {
			t.Fatal(err)
		}
	}
	set(f.env, "APP_DOMAIN")
	set(f.env, "LOG_LEVEL")
	for i := range 25 {
		set(f.env, fmt.Sprintf("OLD_%02d", i))
	}
	set(f.env, "LEGACY_TOKEN")
	set(f.env, "GONE")
	if _, err := f.vault.DeleteValue(ctx, f.actor, f.env, "GONE"); err != nil {
		t.Fatal(err)
	}
	set(f.other, "SESSION_SECRET")
	set(f.other, "OTHER_ONLY")

	referenced := store.ContractNames(contract)
	// Before: every stored name, the orphaned ones found in Go.
	all, err := f.db.StoredValueNames(ctx, f.env.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wantSet, wantOrphaned []string
	for _, n := range all {
		if slices.Contains(referenced, n) {
			wantSet = append(wantSet, n)
		} else {
			wantOrphaned = append(wantOrphaned, n)
		}
	}
	if len(wantOrphaned) != 26 || strings.Join(wantSet, ",") != "APP_DOMAIN,LOG_LEVEL" {
		t.Fatalf("fixture: set %q, orphaned %q", wantSet, wantOrphaned)
	}

	gotSet, err := f.db.StoredValueNamesAmong(ctx, f.env.ID, referenced)
	if err != nil || !slices.Equal(gotSet, wantSet) {
		t.Errorf("referenced names set = %q (err %v), want %q", gotSet, err, wantSet)
	}
	// The values named, read a name at a time: set ones only, once each.
	named, err := f.db.StoredValuesNamed(ctx, f.env.ID, []string{"LOG_LEVEL", "GONE", "APP_DOMAIN", "NEVER_SET", "APP_DOMAIN", "OTHER_ONLY"})
	if err != nil || len(named) != 2 || named[0].Name != "APP_DOMAIN" || named[1].Name != "LOG_LEVEL" || named[0].Version != 1 || named[0].UpdatedBy == "" {
		t.Errorf("values named = %+v (err %v), want APP_DOMAIN v1 and LOG_LEVEL, with who set them", named, err)
	}
	if got, err := f.db.StoredValueNamesAmong(ctx, f.env.ID, []string{"GONE", "LEGACY_TOKEN", "LEGACY_TOKEN"}); err != nil || !slices.Equal(got, []string{"LEGACY_TOKEN"}) {
		t.Errorf("set names among GONE, LEGACY_TOKEN twice = %q (err %v), want LEGACY_TOKEN once", got, err)
	}
	n, err := f.db.OrphanedValueCount(ctx, f.env.ID, referenced, "")
	if err != nil || n != len(wantOrphaned) {
		t.Errorf("orphaned count = %d (err %v), want %d", n, err, len(wantOrphaned))
	}
	// Pages of 10 read back to back are the whole list, in order.
	var paged []string
	for offset := 0; offset < n+10; offset += 10 {
		page, err := f.db.OrphanedValuesPage(ctx, f.env.ID, referenced, "", offset, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page {
			paged = append(paged, v.Name)
		}
	}
	if !slices.Equal(paged, wantOrphaned) {
		t.Errorf("orphaned pages = %q\nwant             %q", paged, wantOrphaned)
	}
	// The first ones and the count, as a plan reads them.
	first, count, err := f.db.OrphanedValues(ctx, f.env.ID, referenced, "", 0, 20)
	if err != nil || count != 26 || len(first) != 20 || first[0].Name != wantOrphaned[0] || first[19].Name != wantOrphaned[19] {
		t.Errorf("first orphaned = %d names from %v, count %d (err %v); want the first 20 of %q and 26", len(first), first, count, err, wantOrphaned)
	}
	// A filter narrows count and page alike, any case.
	if n, err := f.db.OrphanedValueCount(ctx, f.env.ID, referenced, "old_1"); err != nil || n != 10 {
		t.Errorf("orphaned count matching old_1 = %d (err %v), want 10", n, err)
	}
	page, err := f.db.OrphanedValuesPage(ctx, f.env.ID, referenced, "old_1", 8, 10)
	if err != nil || len(page) != 2 || page[0].Name != "OLD_18" || page[1].Name != "OLD_19" {
		t.Errorf("orphaned matching old_1 from 8 = %v (err %v), want OLD_18, OLD_19", page, err)
	}
}

package runs

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/skali-dev/studio/store"
)

// stepCheckValues checks that every required value is stored and decrypts, and fixes the deploy's release of values (applyRelease).
func (r *Runner) stepCheckValues(ctx context.Context, rc *runContext, st *stepCall) (stepResult, error) {
	contract := st.def.ValueContract()
	stored, err := r.DB.StoredValues(ctx, rc.env.ID)
	if err != nil {
		return stepResult{}, err
	}
	var missing []string
	for _, n := range contract.Required {
		if rc.run.ReleaseOf != nil {
			// A rollback checks its own release (applyRelease).
			break
		}
		if !slices.ContainsFunc(stored, func(s store.StoredValue) bool { return s.Name == n }) {
			missing = append(missing, n)
		}
	}
	st.d.Values = append(slices.Clone(contract.Required), sortedKeys(contract.Optional)...)
	if len(missing) > 0 {
		return st.fail("Required values are missing: " + strings.Join(missing, ", ") + "."), nil
	}
	if r.Vault != nil {
		// Every stored value must decrypt; the plaintext stays here.
		if _, err := r.Vault.ResolveValuesForDeploy(ctx, rc.env.ID); err != nil {
			if errors.Is(err, store.ErrValueDoesNotDecrypt) {
				return st.fail("A stored value does not decrypt with the configured keys."), nil
			}
			return stepResult{}, err
		}
	}
	if rc.run.Kind == store.RunDeploy {
		return r.applyRelease(ctx, rc, contract, st.ok, st.fail)
	}
	return st.ok(), nil
}

package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/api"
	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// WriteProblem answers with p as application/problem+json.
func WriteProblem(w http.ResponseWriter, r *http.Request, p api.Problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	p.RequestID = RequestID(r.Context())
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}

// readJSON decodes the request's JSON body into v; unknown fields and a
// body that is not one JSON object are the sender's mistake (400). A body
// over the limit keeps its *http.MaxBytesError (413).
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return err
	}
	if errors.Is(err, io.EOF) {
		return apperr.Errorf(apperr.Invalid, "The request has no body: send a JSON object.")
	}
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "The request body is not the JSON object this endpoint takes: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// API is the JSON API under /api/v1. Every route takes a token
// (web authenticates it); roles are checked through the same Environment
// and project checks as the pages, capped by the token's scope.
type API struct {
	*Base
	Runs  *runs.Service
	Vault *store.Vault
	// PublicURL makes the links in answers absolute.
	PublicURL string
}

// NewAPI returns the JSON API handlers.
func NewAPI(b *Base, svc *runs.Service, v *store.Vault, publicURL string) *API {
	return &API{Base: b, Runs: svc, Vault: v, PublicURL: strings.TrimRight(publicURL, "/")}
}

func (h *API) service() (*runs.Service, error) {
	if h.Runs == nil {
		return nil, apperr.Errorf(apperr.Conflict, "Deploys are not available: this Studio has no value-encryption key configured.")
	}
	return h.Runs, nil
}

// ListEnvironments lists the environments the token may act on with their
// state: GET /api/v1/environments.
func (h *API) ListEnvironments(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u, t := CurrentUser(ctx), CurrentToken(ctx)
	out := []api.Environment{}
	for _, g := range t.Scope {
		role, err := h.RoleOn(ctx, u, t, g.EnvironmentID)
		if err != nil {
			return err
		}
		if role == store.RoleNone {
			continue
		}
		env, err := h.DB.EnvironmentByID(ctx, g.EnvironmentID)
		if err != nil {
			return err
		}
		e := api.Environment{Project: env.Project, Name: env.Name, State: env.State, Role: string(role),
			URL: h.PublicURL + paths.Environment(env.Project, env.Name)}
		if env.ActiveRevisionID != nil {
			rev, err := h.DB.RevisionByID(ctx, *env.ActiveRevisionID)
			if err != nil {
				return err
			}
			e.ActiveRevision = rev.Number
		}
		out = append(out, e)
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"environments": out})
}

// Validate compiles a manifest: POST /api/v1/validate. 200 when valid
// (warnings included), 422 when not, like the page.
func (h *API) Validate(w http.ResponseWriter, r *http.Request) error {
	var body api.ManifestBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	opts := kinds.Options{}
	if k, ok := kinds.Parse(body.Kind); ok {
		opts.Kind = k
	}
	name := body.Filename
	if len(name) > 255 {
		name = ""
	}
	res := kinds.Validate(name, []byte(strings.ReplaceAll(body.Manifest, "\r\n", "\n")), opts)
	v := api.Validation{Kind: string(res.Kind), Valid: res.Valid(), Diagnostics: res.Diagnostics}
	if v.Diagnostics == nil {
		v.Diagnostics = []compiler.Diagnostic{}
	}
	if res.Skali != nil {
		v.Hash, v.Values = res.Skali.Hash, &res.Skali.Values
	}
	status := http.StatusOK
	if !v.Valid {
		status = http.StatusUnprocessableEntity
	}
	return WriteJSON(w, status, v)
}

// AddRevision stores a manifest as the project's next revision:
// POST /api/v1/projects/{project}/revisions. 201 when stored, 200 when
// unchanged, 422 with the diagnostics when it does not compile.
func (h *API) AddRevision(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, role, err := h.project(r)
	if err != nil {
		return err
	}
	if err := requireRevisionRole(role); err != nil {
		return err
	}
	var body api.ManifestBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	src := strings.ReplaceAll(body.Manifest, "\r\n", "\n")
	if strings.TrimSpace(src) == "" {
		return apperr.Errorf(apperr.Invalid, "Send the skali.yaml in the field manifest.")
	}
	if len(src) > MaxManifestBytes {
		return apperr.Errorf(apperr.Invalid, "A manifest may be at most 1 MiB.")
	}
	res := compiler.Compile([]byte(src))
	if !res.Valid() {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The manifest does not compile",
			Detail: "The manifest has errors, so no revision was added.", Field: "manifest", Diagnostics: res.Diagnostics})
		return nil
	}
	latest, err := h.DB.LatestRevision(ctx, p.ID)
	if err != nil {
		return err
	}
	def := res.Definition
	rev, unchanged, err := h.DB.AddRevision(ctx, ActorOf(r), p.ID, store.NewRevision{
		Name: def.Name, Description: def.Description, Source: src,
		Canonical: def.Canonical(), Hash: res.Hash, Summary: compiler.Summarize(DefinitionOf(latest), def),
	})
	if err != nil {
		return err
	}
	out := api.Revision{Project: p.Name, Number: rev.Number, Hash: rev.Hash, Summary: rev.Summary, Unchanged: unchanged,
		Warnings: res.Warnings(), URL: h.PublicURL + paths.Revision(p.Name, rev.Number)}
	if out.Warnings == nil {
		out.Warnings = []compiler.Diagnostic{}
	}
	status := http.StatusCreated
	if unchanged {
		status = http.StatusOK
	}
	return WriteJSON(w, status, out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ShowPlan plans a deploy: GET .../plan?revision=N (default latest).
func (h *API) ShowPlan(w http.ResponseWriter, r *http.Request) error {
	rev, err := parseRevision(r.URL.Query().Get("revision"))
	if err != nil {
		return err
	}
	env, role, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	dp, err := svc.PlanDeploy(r.Context(), env, rev)
	if err != nil {
		return err
	}
	u := CurrentUser(r.Context())
	dp.ForReader(role.Includes(store.RoleDeployer), u != nil && u.IsAdmin)
	p := api.Plan{Revision: dp.To.Number, Latest: dp.Latest, FirstDeploy: dp.FirstDeploy, Rollback: dp.Rollback, Redeploy: dp.Redeploy,
		CanStart:     dp.CanStart() && role.Includes(store.RoleDeployer) && (!dp.PublishesValues() || role.Includes(store.RoleAdmin)),
		NeedsConfirm: len(dp.Destructive) > 0, MissingValues: nonNil(dp.MissingValues), OrphanedValues: nonNil(dp.OrphanedValues[:min(len(dp.OrphanedValues), views.OrphanedShown)]), OrphanedCount: dp.OrphanedCount,
		Destructive: nonNil(dp.Destructive), Refused: nonNil(dp.Refused), PublicValues: []string{},
		Changes: []api.PlanChange{}, Hostnames: []api.Hostname{}}
	if dp.From != nil {
		p.FromRevision = dp.From.Number
	}
	for _, pv := range dp.PublicValues {
		p.PublicValues = append(p.PublicValues, pv.Name)
	}
	for _, c := range dp.Changes {
		ch := api.PlanChange{Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: []api.FieldChange{}}
		for _, f := range c.Fields {
			ch.Fields = append(ch.Fields, api.FieldChange{Field: f.Field, Old: f.Old, New: f.New})
		}
		p.Changes = append(p.Changes, ch)
	}
	for _, hx := range dp.Hostnames {
		ah := api.Hostname{Route: hx.Route, Expression: hx.Expression, TLS: hx.TLS}
		if rh, ok := dp.Resolved[hx.Expression]; ok && role.Includes(store.RoleDeployer) && len(rh.Missing) == 0 && !rh.NotAHostname {
			ah.Hostname = rh.Name
		}
		p.Hostnames = append(p.Hostnames, ah)
	}
	return WriteJSON(w, http.StatusOK, p)
}

// StartDeploy starts a deploy: POST .../deploys. A refusal is 422 with the
// page's sentence and the field it concerns.
func (h *API) StartDeploy(w http.ResponseWriter, r *http.Request) error {
	var body api.DeployBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	if body.Revision < 0 || body.Revision > math.MaxInt32 {
		return apperr.Errorf(apperr.Invalid, "revision must be a revision number from 1 to 2147483647, such as 3.")
	}
	if body.Release < 0 {
		return apperr.Errorf(apperr.Invalid, "release must be the run number of an earlier successful deploy, such as 12.")
	}
	if body.Release > 0 && (body.Revision > 0 || body.Redeploy) {
		return apperr.Errorf(apperr.Invalid, "A rollback deploys the release's own revision: send release without revision or redeploy.")
	}
	env, role, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	run, err := svc.StartDeploy(r.Context(), ActorOf(r), env, runs.DeployRequest{Revision: body.Revision,
		Confirm: strings.TrimSpace(body.Confirm), Redeploy: body.Redeploy, ConfirmPublicValue: strings.TrimSpace(body.ConfirmPublicValue),
		Release: body.Release, Role: role, FreezeOverride: strings.TrimSpace(body.FreezeOverride)})
	var refusal *runs.DeployRefusal
	if errors.As(err, &refusal) {
		field := refusal.Field
		if field == "" && body.Release > 0 {
			field = "release"
		} else if field == "" {
			field = "revision"
		}
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The deploy was refused", Detail: refusal.Message, Field: field})
		return nil
	}
	if err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusCreated, env, run)
}

func timeText(t interface{ Format(string) string }) string {
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

func (h *API) writeRun(w http.ResponseWriter, r *http.Request, status int, env *store.Environment, run *store.Run) error {
	cps, err := h.DB.Checkpoints(r.Context(), run.ID)
	if err != nil {
		return err
	}
	det := runs.DecodeRunDetail(run.Detail)
	out := api.Run{ID: run.ID, Number: run.Number, Kind: string(run.Kind), Status: run.Status, Finished: store.RunFinished(run.Status), Reason: run.Reason,
		Revision: run.Revision, FromRevision: run.FromRevision, CreatedBy: run.CreatedBy, CreatedAt: timeText(run.CreatedAt.UTC()),
		CancelRequested: run.CancelRequested, Deferred: det.Deferred, Warnings: det.Warnings,
		URL:         h.PublicURL + paths.Run(env.Project, env.Name, run.ID),
		APIURL:      h.PublicURL + "/api/v1" + paths.Run(env.Project, env.Name, run.ID),
		Checkpoints: []api.Checkpoint{}}
	if run.StartedAt != nil {
		s := timeText(run.StartedAt.UTC())
		out.StartedAt = &s
	}
	if run.FinishedAt != nil {
		s := timeText(run.FinishedAt.UTC())
		out.FinishedAt = &s
	}
	for _, cp := range cps {
		d := runs.DecodeCheckpointDetail(cp.Detail)
		c := api.Checkpoint{Position: cp.Position, Kind: cp.Kind, Name: cp.Name, Status: cp.Status, Warning: cp.Warning, Error: d.Error}
		if cp.StartedAt != nil {
			s := timeText(cp.StartedAt.UTC())
			c.StartedAt = &s
		}
		if cp.FinishedAt != nil {
			s := timeText(cp.FinishedAt.UTC())
			c.FinishedAt = &s
		}
		out.Checkpoints = append(out.Checkpoints, c)
	}
	if out.Approval, err = h.apiApproval(r, env, run, cps); err != nil {
		return err
	}
	return WriteJSON(w, status, out)
}

func (h *API) run(r *http.Request, env *store.Environment) (*store.Run, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "run"), 10, 64)
	if err != nil || id < 1 {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	run, err := h.DB.RunByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if run.EnvironmentID != env.ID {
		return nil, apperr.Errorf(apperr.NotFound, "No such run.")
	}
	return run, nil
}

// ShowRun reads a run with its checkpoints: GET .../runs/{run}.
func (h *API) ShowRun(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleViewer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusOK, env, run)
}

// CancelRun asks a run to stop at its next safe point: POST .../runs/{run}/cancel.
func (h *API) CancelRun(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	run, err := h.run(r, env)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	if _, err := svc.Cancel(r.Context(), ActorOf(r), env, run.ID); err != nil {
		return err
	}
	if run, err = h.DB.RunByID(r.Context(), run.ID); err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusAccepted, env, run)
}

// TakeSnapshot takes a manual snapshot: POST .../backups, 201 with its run.
func (h *API) TakeSnapshot(w http.ResponseWriter, r *http.Request) error {
	env, _, err := h.Environment(r, store.RoleDeployer)
	if err != nil {
		return err
	}
	svc, err := h.service()
	if err != nil {
		return err
	}
	run, err := svc.StartBackup(r.Context(), ActorOf(r), env)
	if err != nil {
		var br *runs.BackupRefusal
		if errors.As(err, &br) {
			msg := br.Message
			if br.NoTarget {
				msg = runs.NoTargetMessage
			}
			WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The snapshot was refused", Detail: msg, Field: br.Field})
			return nil
		}
		return err
	}
	return h.writeRun(w, r, http.StatusCreated, env, run)
}

// SetValue stores a value: PUT .../values/{name} with {"value": "...",
// "confirm_orphan": true for a name the manifest does not use}.
func (h *API) SetValue(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if h.Vault == nil {
		return fmt.Errorf("handlers: no value-encryption keyring configured")
	}
	var body api.ValueBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	if field, p := valueInputProblem(shown.Contract, name, body.Value); field != "" {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The value was refused", Detail: p, Field: field})
		return nil
	}
	orphaned := !store.References(shown.Contract, name)
	if orphaned && !body.ConfirmOrphan {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The value was refused", Field: "confirm_orphan",
			Detail: fmt.Sprintf("The manifest does not reference %s, so deploys would ignore it. Send confirm_orphan: true to store it anyway.", name)})
		return nil
	}
	version, err := h.Vault.SetValue(ctx, ActorOf(r), env, name, *body.Value)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, api.ValueSet{Name: name, Version: version, Orphaned: orphaned})
}

// ImportValues stores the values of a .env file in one transaction:
// POST .../values/import with {"dotenv": "NAME=value\n..."}.
func (h *API) ImportValues(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return err
	}
	if h.Vault == nil {
		return fmt.Errorf("handlers: no value-encryption keyring configured")
	}
	var body api.ImportBody
	if err := readJSON(r, &body); err != nil {
		return err
	}
	refuse := func(msg string) error {
		WriteProblem(w, r, api.Problem{Status: http.StatusUnprocessableEntity, Title: "The import was refused", Detail: msg, Field: "dotenv"})
		return nil
	}
	if len(body.Dotenv) > MaxDotenvBytes {
		return refuse("The file is larger than 1 MiB.")
	}
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	entries, problems, err := dotenvEntries(body.Dotenv, shown.Contract)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return refuse(strings.Join(problems, " ") + " Nothing was changed.")
	}
	if len(entries) == 0 {
		return refuse("Send the contents of a .env file: lines of NAME=value.")
	}
	res, err := h.Vault.ImportValues(ctx, ActorOf(r), env, shown.Contract, entries)
	if apperr.CodeOf(err) == apperr.Invalid {
		return refuse(apperr.Message(err) + " Nothing was changed.")
	}
	if err != nil {
		return err
	}
	out := api.Import{Changed: []api.ValueVersion{}, Unchanged: nonNil(res.Unchanged), Skipped: nonNil(res.Skipped)}
	for _, c := range res.Changed {
		out.Changed = append(out.Changed, api.ValueVersion{Name: c.Name, Version: c.Version})
	}
	return WriteJSON(w, http.StatusOK, out)
}

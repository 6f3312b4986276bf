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

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/compiler/kinds"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// Problem is an RFC 9457 problem document, the body of every error of the
// JSON API. Detail is the sentence the matching page shows.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the request field a refusal concerns.
	Field string `json:"field,omitempty"`
	// Diagnostics are a manifest's problems, when it does not compile.
	Diagnostics []compiler.Diagnostic `json:"diagnostics,omitempty"`
	RequestID   string                `json:"request_id,omitempty"`
}

// WriteProblem answers with p as application/problem+json.
func WriteProblem(w http.ResponseWriter, r *http.Request, p Problem) {
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

// APIEnvironment is an environment as the API lists it.
type APIEnvironment struct {
	Project string `json:"project"`
	Name    string `json:"name"`
	// State is active, restoring or down.
	State string `json:"state"`
	// ActiveRevision is the deployed revision's number, 0 before the first deploy.
	ActiveRevision int `json:"active_revision"`
	// Role is what the token may do there: its scope capped by its owner's role.
	Role string `json:"role"`
	URL  string `json:"url"`
}

// ListEnvironments lists the environments the token may act on with their
// state: GET /api/v1/environments.
func (h *API) ListEnvironments(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	u, t := CurrentUser(ctx), CurrentToken(ctx)
	out := []APIEnvironment{}
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
		e := APIEnvironment{Project: env.Project, Name: env.Name, State: env.State, Role: string(role),
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

// manifestBody is the body of validate and add-a-revision.
type manifestBody struct {
	Manifest string `json:"manifest"`
	// Kind and Filename help validate tell a manifest's kind.
	Kind     string `json:"kind,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// APIValidation is a validated manifest, shaped like one object of
// `studio validate --json`.
type APIValidation struct {
	Kind        string                  `json:"kind"`
	Valid       bool                    `json:"valid"`
	Hash        string                  `json:"hash,omitempty"`
	Diagnostics []compiler.Diagnostic   `json:"diagnostics"`
	Values      *compiler.ValueContract `json:"values,omitempty"`
}

// Validate compiles a manifest: POST /api/v1/validate. 200 when valid
// (warnings included), 422 when not, like the page.
func (h *API) Validate(w http.ResponseWriter, r *http.Request) error {
	var body manifestBody
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
	v := APIValidation{Kind: string(res.Kind), Valid: res.Valid(), Diagnostics: res.Diagnostics}
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

// APIRevision is a stored revision of a project.
type APIRevision struct {
	Project string `json:"project"`
	Number  int    `json:"number"`
	Hash    string `json:"hash"`
	Summary string `json:"summary"`
	// Unchanged is true when the manifest compiled to the latest revision's
	// definition, so nothing was stored.
	Unchanged bool                  `json:"unchanged"`
	Warnings  []compiler.Diagnostic `json:"warnings"`
	URL       string                `json:"url"`
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
	var body manifestBody
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
		WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The manifest does not compile",
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
	out := APIRevision{Project: p.Name, Number: rev.Number, Hash: rev.Hash, Summary: rev.Summary, Unchanged: unchanged,
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

// APIPlan is a deploy plan. Hostnames are given as written, never resolved:
// a resolved hostname is built from values, and no answer carries a value.
type APIPlan struct {
	Revision      int      `json:"revision"`
	Latest        int      `json:"latest"`
	FromRevision  int      `json:"from_revision"`
	FirstDeploy   bool     `json:"first_deploy"`
	Rollback      bool     `json:"rollback"`
	Redeploy      bool     `json:"redeploy"`
	CanStart      bool     `json:"can_start"`
	NeedsConfirm  bool     `json:"needs_confirm"`
	MissingValues []string `json:"missing_values"`
	// OrphanedValues are the first views.OrphanedShown stored names the
	// revision does not reference, in name order; OrphanedCount counts
	// them all (the values page lists every one).
	OrphanedValues []string        `json:"orphaned_values"`
	OrphanedCount  int             `json:"orphaned_count"`
	Destructive    []string        `json:"destructive"`
	Refused        []string        `json:"refused"`
	PublicValues   []string        `json:"public_values"`
	Changes        []APIPlanChange `json:"changes"`
	Hostnames      []APIHostname   `json:"hostnames"`
}

// APIPlanChange is one service the deploy changes.
type APIPlanChange struct {
	Kind   string           `json:"kind"`
	Name   string           `json:"name"`
	Action string           `json:"action"`
	Fields []APIFieldChange `json:"fields"`
}

// APIFieldChange is one changed field, expressions as written.
type APIFieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// APIHostname is a hostname of the new revision as written.
type APIHostname struct {
	Route      string `json:"route"`
	Expression string `json:"expression"`
	// Hostname is the hostname the deploy will serve, for deployers and
	// admins (withheld while a value it is built from awaits publication).
	Hostname string `json:"hostname,omitempty"`
	TLS      string `json:"tls"`
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
	p := APIPlan{Revision: dp.To.Number, Latest: dp.Latest, FirstDeploy: dp.FirstDeploy, Rollback: dp.Rollback, Redeploy: dp.Redeploy,
		CanStart:     dp.CanStart() && role.Includes(store.RoleDeployer) && (!dp.PublishesValues() || role.Includes(store.RoleAdmin)),
		NeedsConfirm: len(dp.Destructive) > 0, MissingValues: nonNil(dp.MissingValues), OrphanedValues: nonNil(dp.OrphanedValues[:min(len(dp.OrphanedValues), views.OrphanedShown)]), OrphanedCount: dp.OrphanedCount,
		Destructive: nonNil(dp.Destructive), Refused: nonNil(dp.Refused), PublicValues: []string{},
		Changes: []APIPlanChange{}, Hostnames: []APIHostname{}}
	if dp.From != nil {
		p.FromRevision = dp.From.Number
	}
	for _, pv := range dp.PublicValues {
		p.PublicValues = append(p.PublicValues, pv.Name)
	}
	for _, c := range dp.Changes {
		ch := APIPlanChange{Kind: c.Kind, Name: c.Name, Action: c.Action, Fields: []APIFieldChange{}}
		for _, f := range c.Fields {
			ch.Fields = append(ch.Fields, APIFieldChange{Field: f.Field, Old: f.Old, New: f.New})
		}
		p.Changes = append(p.Changes, ch)
	}
	for _, hx := range dp.Hostnames {
		ah := APIHostname{Route: hx.Route, Expression: hx.Expression, TLS: hx.TLS}
		if rh, ok := dp.Resolved[hx.Expression]; ok && role.Includes(store.RoleDeployer) && len(rh.Missing) == 0 && !rh.NotAHostname {
			ah.Hostname = rh.Name
		}
		p.Hostnames = append(p.Hostnames, ah)
	}
	return WriteJSON(w, http.StatusOK, p)
}

// deployBody is the body of starting a deploy: the page's form fields.
type deployBody struct {
	Revision           int    `json:"revision,omitempty"`
	Confirm            string `json:"confirm,omitempty"`
	Redeploy           bool   `json:"redeploy,omitempty"`
	ConfirmPublicValue string `json:"confirm_public_value,omitempty"`
	// FreezeOverride is an installation admin's reason to deploy during
	// a freeze window.
	FreezeOverride string `json:"freeze_override,omitempty"`
	// Release rolls back to that earlier successful deploy (its run id):
	// its revision and value versions.
	Release int64 `json:"release,omitempty"`
}

// StartDeploy starts a deploy: POST .../deploys. A refusal is 422 with the
// page's sentence and the field it concerns.
func (h *API) StartDeploy(w http.ResponseWriter, r *http.Request) error {
	var body deployBody
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
		WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The deploy was refused", Detail: refusal.Message, Field: field})
		return nil
	}
	if err != nil {
		return err
	}
	return h.writeRun(w, r, http.StatusCreated, env, run)
}

// APIRun is a run with its checkpoints.
type APIRun struct {
	ID int64 `json:"id"`
	// Number counts the environment's runs: how its pages name the run
	// ("#12 of production"). ID is what URLs and the API take.
	Number int    `json:"number"`
	Kind   string `json:"kind"`
	// Status is pending, running, waiting, succeeded,
	// succeeded-with-warnings, failed or cancelled.
	Status          string          `json:"status"`
	Finished        bool            `json:"finished"`
	Reason          string          `json:"reason,omitempty"`
	Revision        int             `json:"revision,omitempty"`
	FromRevision    int             `json:"from_revision,omitempty"`
	CreatedBy       string          `json:"created_by"`
	CreatedAt       string          `json:"created_at"`
	StartedAt       *string         `json:"started_at"`
	FinishedAt      *string         `json:"finished_at"`
	CancelRequested bool            `json:"cancel_requested"`
	Deferred        int             `json:"deferred"`
	Warnings        int             `json:"warnings"`
	URL             string          `json:"url"`
	APIURL          string          `json:"api_url"`
	Checkpoints     []APICheckpoint `json:"checkpoints"`
	// Approval is what a deploy of a protected environment waits for
	// (omitted once its approvals are met: then its reason says when it
	// starts).
	Approval *APIApproval `json:"approval,omitempty"`
}

// APICheckpoint is one checkpoint of a run.
type APICheckpoint struct {
	Position   int     `json:"position"`
	Kind       string  `json:"kind"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	Warning    string  `json:"warning,omitempty"`
	Error      string  `json:"error,omitempty"`
	StartedAt  *string `json:"started_at"`
	FinishedAt *string `json:"finished_at"`
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
	out := APIRun{ID: run.ID, Number: run.Number, Kind: string(run.Kind), Status: run.Status, Finished: store.RunFinished(run.Status), Reason: run.Reason,
		Revision: run.Revision, FromRevision: run.FromRevision, CreatedBy: run.CreatedBy, CreatedAt: timeText(run.CreatedAt.UTC()),
		CancelRequested: run.CancelRequested, Deferred: det.Deferred, Warnings: det.Warnings,
		URL:         h.PublicURL + paths.Run(env.Project, env.Name, run.ID),
		APIURL:      h.PublicURL + "/api/v1" + paths.Run(env.Project, env.Name, run.ID),
		Checkpoints: []APICheckpoint{}}
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
		c := APICheckpoint{Position: cp.Position, Kind: cp.Kind, Name: cp.Name, Status: cp.Status, Warning: cp.Warning, Error: d.Error}
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
			WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The snapshot was refused", Detail: msg, Field: br.Field})
			return nil
		}
		return err
	}
	return h.writeRun(w, r, http.StatusCreated, env, run)
}

// APIValueSet is what setting a value answers: never the value.
type APIValueSet struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	// Orphaned is true when the manifest does not reference the name.
	Orphaned bool `json:"orphaned"`
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
	var body struct {
		Value         *string `json:"value"`
		ConfirmOrphan bool    `json:"confirm_orphan,omitempty"`
	}
	if err := readJSON(r, &body); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	shown, err := h.shownRevision(ctx, env)
	if err != nil {
		return err
	}
	if field, p := valueInputProblem(shown.Contract, name, body.Value); field != "" {
		WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The value was refused", Detail: p, Field: field})
		return nil
	}
	orphaned := !store.References(shown.Contract, name)
	if orphaned && !body.ConfirmOrphan {
		WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The value was refused", Field: "confirm_orphan",
			Detail: fmt.Sprintf("The manifest does not reference %s, so deploys would ignore it. Send confirm_orphan: true to store it anyway.", name)})
		return nil
	}
	version, err := h.Vault.SetValue(ctx, ActorOf(r), env, name, *body.Value)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, APIValueSet{Name: name, Version: version, Orphaned: orphaned})
}

// APIImport is what importing a .env file answers: names and versions.
type APIImport struct {
	Changed   []APIValueVersion `json:"changed"`
	Unchanged []string          `json:"unchanged"`
	// Skipped are names the manifest does not reference: not stored.
	Skipped []string `json:"skipped"`
}

// APIValueVersion is a value's name and new version.
type APIValueVersion struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
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
	var body struct {
		Dotenv string `json:"dotenv"`
	}
	if err := readJSON(r, &body); err != nil {
		return err
	}
	refuse := func(msg string) error {
		WriteProblem(w, r, Problem{Status: http.StatusUnprocessableEntity, Title: "The import was refused", Detail: msg, Field: "dotenv"})
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
	out := APIImport{Changed: []APIValueVersion{}, Unchanged: nonNil(res.Unchanged), Skipped: nonNil(res.Skipped)}
	for _, c := range res.Changed {
		out.Changed = append(out.Changed, APIValueVersion{Name: c.Name, Version: c.Version})
	}
	return WriteJSON(w, http.StatusOK, out)
}

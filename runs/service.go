package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// Service plans and starts deploys, cancels runs, and reconciles deferred
// and failed certificates. With a River client (see StartRiver) runs are
// executed as River jobs; without one (tests) nothing executes them until
// Runner.Execute is called.
type Service struct {
	DB       *store.DB
	Vault    *store.Vault
	Platform platform.Platform
	Runner   *Runner
	Now      func() time.Time
	Logger   *slog.Logger
	// ReconcileDeadline bounds the probes of one environment's reconcile
	// (default ReconcileDeadline).
	ReconcileDeadline time.Duration
	// ReconcileInterval is how often the periodic reconcile probes deferred
	// domains again, which pages count down to as the next automatic check
	// (StartRiver sets it from its options when they turn the reconciler
	// on; zero or negative: no automatic checks).
	ReconcileInterval time.Duration
	// PublicAddresses are the addresses this installation's edge answers
	// on: the records a DNS-pending domain's owner is asked to create.
	PublicAddresses []netip.Addr
	// reserved are the Studio's own hostnames (SetReservedHostnames).
	reserved []string
	river    *river.Client[pgx.Tx]
	// webhooks are the delivery options StartRiver was given.
	webhooks *WebhookOptions
	// stopSupervising ends superviseLeases; supervising waits for it.
	stopSupervising context.CancelFunc
	supervising     sync.WaitGroup
	// activated carries the environments a run made a revision active
	// in, to the health monitor (WatchHealth) of this process: the
	// platform tells of its own changes, not of an activation.
	activated chan platform.Env
}

// NewService returns a service on db whose runs use platform.
func NewService(db *store.DB, vault *store.Vault, platform platform.Platform, now func() time.Time, logger *slog.Logger) *Service {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Service{DB: db, Vault: vault, Platform: platform, Now: now, Logger: logger,
		Runner: &Runner{DB: db, Vault: vault, Platform: platform, Now: now, Logger: logger}}
	s.Runner.Replan = s.approvalPlanOfRun
	s.activated = newActivated()
	s.Runner.Activated = s.tellActivated
	return s
}

// newActivated is the channel of Service.activated.
func newActivated() chan platform.Env { return make(chan platform.Env, 16) }

// tellActivated hands the health monitor an environment whose active
// revision changed; when it is behind (or not running), the environment
// is read at its next start or change anyway.
func (s *Service) tellActivated(e platform.Env) {
	select {
	case s.activated <- e:
	default:
	}
}

// DeployPlan is a plan with the revisions it compares.
type DeployPlan struct {
	*Plan
	To   *store.Revision
	From *store.Revision
	// Hostnames are the new revision's hostnames as written; Resolved holds
	// them resolved with the environment's values, by expression, except
	// those built from a PublicValue: those are withheld from every page
	// until an admin chooses to publish them (StartDeploy).
	Hostnames []HostnameExpression
	Resolved  map[string]store.ResolvedHost
	// resolved is Resolved with the withheld hostnames, for the run.
	resolved map[string]store.ResolvedHost
	// Latest is the project's newest revision number.
	Latest int
	// ValueChanges are the values set, changed or deleted since the active
	// deploy, by name and version: the deploy applies them. Empty when the
	// active deploy recorded no release, and on a rollback (see Release).
	ValueChanges []store.ValueChange
	// Release is the earlier deploy a rollback deploys again; nil otherwise.
	Release *RollbackPlan
	// claims are the resolved hostnames the deploy claims (all of them,
	// withheld ones included); hostRefusals the refusals of those held
	// elsewhere (ForReader words them for the reader).
	claims       []string
	hostRefusals []hostRefusal
	// Published are the values a hostname of the plan publishes whose
	// version to deploy an admin published already (store.Publication):
	// they are not PublicValues, nothing is asked again for them.
	Published []PublishedValue
	// allPublic are the plan's PublicValues before the published ones
	// were taken out; publish the versions the deploy publishes.
	allPublic []PublicValue
	publish   []store.NameVersion
	// Rollouts say, per application of the revision, whether the deploy
	// rolls it out and why (planRollouts).
	Rollouts []AppRollout
	// HandEdits are the fields other field managers (a person's kubectl
	// scale or set image) own on the objects the Studio applied: the
	// deploy takes back those it sets, and a blue-green slot it replaces
	// goes with its edits. HandEditsError says why they could not be read.
	// OtherCluster says the active revision runs on another cluster or
	// platform than this Studio's (OtherCluster); the plan then deploys
	// everything.
	OtherCluster   string
	HandEdits      []platform.HandEdit
	HandEditsError string
	// Drift is what differs from what the Studio last applied, as last
	// synced from the platform (store.DriftOf): each drifted application
	// rolls, so the deploy applies what the Studio deploys again; the
	// drift of an application the revision removes goes with it.
	Drift []platform.Drift
}

// PublishedValue is a value version an admin published in a hostname.
type PublishedValue struct {
	Name    string
	Version int
	Since   time.Time
	// By names the admin ("" once the user is gone).
	By string
}

// applyPublications takes out of dp.PublicValues the values whose version
// the deploy would deploy (versions, by name) is published already, and
// withholds from dp.Resolved the hostnames built from the others. It
// returns the withheld expressions.
func (s *Service) applyPublications(ctx context.Context, env *store.Environment, dp *DeployPlan, versions map[string]int) (map[string]bool, error) {
	if dp.allPublic == nil {
		dp.allPublic = dp.PublicValues
	}
	var nvs []store.NameVersion
	for _, pv := range dp.allPublic {
		if v := versions[pv.Name]; v > 0 {
			nvs = append(nvs, store.NameVersion{Name: pv.Name, Version: v})
		}
	}
	pubs, err := s.DB.Publications(ctx, env.ID, nvs)
	if err != nil {
		return nil, err
	}
	dp.PublicValues, dp.Published, dp.publish = nil, nil, nil
	for _, pv := range dp.allPublic {
		nv := store.NameVersion{Name: pv.Name, Version: versions[pv.Name]}
		if p, ok := pubs[nv]; ok {
			dp.Published = append(dp.Published, PublishedValue{Name: nv.Name, Version: nv.Version, Since: p.At, By: p.By})
			continue
		}
		dp.PublicValues = append(dp.PublicValues, pv)
		if nv.Version > 0 {
			dp.publish = append(dp.publish, nv)
		}
	}
	withheld := map[string]bool{}
	for _, pv := range dp.PublicValues {
		for _, h := range pv.Hostnames {
			withheld[h.Expression] = true
		}
	}
	dp.Resolved = map[string]store.ResolvedHost{}
	for e, rh := range dp.resolved {
		if !withheld[e] {
			dp.Resolved[e] = rh
		}
	}
	return withheld, nil
}

// handEditsWait bounds reading the hand edits of a plan: a cluster that
// does not answer leaves the plan without them, saying so.
const handEditsWait = 5 * time.Second

// PlanDeploy plans a deploy of revision number (0: the latest) to env.
func (s *Service) PlanDeploy(ctx context.Context, env *store.Environment, number int) (*DeployPlan, error) {
	latest, err := s.DB.LatestRevision(ctx, env.ProjectID)
	if err != nil {
		return nil, err
	}
	to := latest
	if number > 0 && number != latest.Number {
		if to, err = s.DB.RevisionByNumber(ctx, env.ProjectID, number); err != nil {
			return nil, err
		}
	}
	dp := &DeployPlan{To: to, Latest: latest.Number}
	in := PlanInput{To: to.Definition, ToRevision: to.Number, BucketBytes: map[string]int64{}, Revisions: map[int]*compiler.Definition{}}
	revisions, err := s.DB.Revisions(ctx, env.ProjectID)
	if err != nil {
		return nil, err
	}
	for _, r := range revisions {
		in.Revisions[r.Number] = r.Definition
	}
	// On another cluster than the active revision's, nothing of it runs
	// here: the plan deploys everything, as a first deploy does.
	if dp.OtherCluster, err = s.OtherCluster(ctx, env); err != nil {
		return nil, err
	}
	if env.ActiveRevisionID != nil && dp.OtherCluster == "" {
		if dp.From, err = s.DB.RevisionByID(ctx, *env.ActiveRevisionID); err != nil {
			return nil, err
		}
		in.From, in.FromRevision = dp.From.Definition, dp.From.Number
		for name := range dp.From.Definition.Buckets {
			if in.BucketBytes[name], err = s.Platform.BucketBytes(ctx, platformEnv(env), name); err != nil {
				return nil, fmt.Errorf("runs: what bucket %s stores: %w", name, err)
			}
		}
	}
	// The set names the revision references, and the first orphaned ones
	// with a count of them all: what the plan shows, not every stored
	// name (an environment may hold thousands the manifest dropped).
	referenced := store.ContractNames(to.Definition.ValueContract())
	if in.StoredValues, err = s.DB.StoredValueNamesAmong(ctx, env.ID, referenced); err != nil {
		return nil, err
	}
	orphaned, count, err := s.DB.OrphanedValues(ctx, env.ID, referenced, "", 0, OrphanedListed)
	if err != nil {
		return nil, err
	}
	for _, v := range orphaned {
		in.StoredValues = append(in.StoredValues, v.Name)
	}
	in.OrphanedCount = count
	dp.Plan = PlanDeploy(in)
	if c, ok := platform.As[platform.DefinitionChecker](s.Platform); ok {
		dp.Refused = append(dp.Refused, c.CheckDefinition(to.Definition)...)
	}
	if hr, ok := platform.As[platform.HandEditReader](s.Platform); ok && env.ActiveRevisionID != nil {
		hctx, cancel := context.WithTimeout(ctx, handEditsWait)
		dp.HandEdits, err = hr.HandEdits(hctx, platformEnv(env))
		cancel()
		if err != nil {
			dp.HandEdits, dp.HandEditsError = nil, err.Error()
		}
	}
	if env.ActiveRevisionID != nil && dp.OtherCluster == "" {
		if dp.Drift, err = s.DB.DriftOf(ctx, env.ID); err != nil {
			return nil, err
		}
	}
	dp.Hostnames = HostnameExpressions(to.Definition)
	dp.resolved = map[string]store.ResolvedHost{}
	if s.Vault != nil {
		if dp.resolved, err = s.Vault.ResolvePlannedHostnames(ctx, env.ID, to.Definition); err != nil {
			return nil, err
		}
	}
	// The versions of the values that build a hostname: read by name, not
	// with every stored value.
	var public []string
	all := dp.allPublic
	if all == nil {
		all = dp.PublicValues
	}
	for _, pv := range all {
		public = append(public, pv.Name)
	}
	versions := map[string]int{}
	if len(public) > 0 {
		stored, err := s.DB.StoredValuesNamed(ctx, env.ID, public)
		if err != nil {
			return nil, err
		}
		for _, v := range stored {
			versions[v.Name] = v.Version
		}
	}
	withheld, err := s.applyPublications(ctx, env, dp, versions)
	if err != nil {
		return nil, err
	}
	for _, h := range dp.Hostnames {
		if rh := dp.resolved[h.Expression]; rh.NotAHostname {
			dp.Refused = append(dp.Refused, fmt.Sprintf("The values of %s (%s) do not make a hostname.", h.Route, h.Expression))
		}
	}
	if err := s.planClaims(ctx, env, dp, withheld); err != nil {
		return nil, err
	}
	if dp.ValueChanges, err = s.valueChangesSinceActive(ctx, env, dp); err != nil {
		return nil, err
	}
	if err := s.planRollouts(ctx, env, dp); err != nil {
		return nil, err
	}
	return dp, nil
}

// DeployRequest is what a person asks to deploy.
type DeployRequest struct {
	// Revision is the revision number; 0 means the latest.
	Revision int
	// Confirm is the environment's name typed to confirm a destructive deploy.
	Confirm string
	// Redeploy confirms deploying the active revision again.
	Redeploy bool
	// ConfirmPublicValue is the environment's name typed by an admin to
	// publish, in a hostname, values the project also uses outside
	// hostnames (DeployPlan.PublicValues).
	ConfirmPublicValue string
	// Release is the run id of an earlier successful deploy to roll back
	// to: its revision and its value versions (0: not a rollback).
	Release int64
	// Role is the role the request holds on the environment: its user's,
	// capped by its token's scope (handlers' Environment check). Publishing
	// a value needs admin here. When empty, the user's own role is looked
	// up, unless the actor acts through a token (then it may not publish).
	Role store.Role
	// FreezeOverride is an installation admin's typed reason to deploy in
	// a freeze window (audited); empty: the window applies.
	FreezeOverride string
}

// DeployRefusal is a deploy that cannot start as asked, with the form
// field it concerns ("confirm", "redeploy", "revision",
// "confirm_public_value", "public_value" for a deployer who may not
// publish them, or "").
type DeployRefusal struct {
	Field   string
	Message string
}

func (e *DeployRefusal) Error() string { return e.Message }

// StartDeploy plans the deploy, checks it may start, and creates its run
// and job in one transaction.
func (s *Service) StartDeploy(ctx context.Context, a store.Actor, env *store.Environment, req DeployRequest) (*store.Run, error) {
	if env.State == store.EnvironmentRestoreFailed {
		return nil, &DeployRefusal{Message: fmt.Sprintf("%s is down: a restore failed. Deploys are refused until a restore completes or an admin accepts the data as it is (backups page).", env.Name)}
	}
	if env.State != store.EnvironmentActive {
		return nil, &DeployRefusal{Message: fmt.Sprintf("The environment is %s; deploys wait until it is active again.", env.State)}
	}
	var dp *DeployPlan
	var err error
	if req.Release != 0 {
		dp, err = s.PlanRollback(ctx, env, req.Release)
	} else {
		dp, err = s.PlanDeploy(ctx, env, req.Revision)
	}
	if err != nil {
		return nil, err
	}
	dp.ForReader(true, a.User != nil && a.User.IsAdmin)
	mayPublish := false
	if dp.PublishesValues() {
		role := req.Role
		if role == store.RoleNone && a.Token == "" {
			if role, err = s.DB.EnvironmentRole(ctx, a.User, env.ID); err != nil {
				return nil, err
			}
		}
		mayPublish = role.Includes(store.RoleAdmin)
	}
	switch {
	case len(dp.MissingValues) > 0:
		return nil, &DeployRefusal{Message: fmt.Sprintf("Required values are missing: %s. Set them on the values page first.", joinNames(dp.MissingValues))}
	case len(dp.Refused) > 0:
		return nil, &DeployRefusal{Message: "This deploy is refused: " + dp.Refused[0]}
	case dp.PublishesValues() && !mayPublish:
		return nil, &DeployRefusal{Field: "public_value", Message: fmt.Sprintf(
			"Only an admin of %s can deploy a hostname built from %s, which the project also uses outside hostnames: hostnames are public (DNS, certificates, logs).",
			env.Name, joinNames(dp.PublicValueNames()))}
	case dp.Redeploy && !req.Redeploy && dp.Release == nil && len(dp.ValueChanges) == 0:
		return nil, &DeployRefusal{Field: "redeploy", Message: fmt.Sprintf("Revision %d is already active. Tick redeploy to deploy it again.", dp.To.Number)}
	case dp.NeedsConfirmation() && req.Confirm != env.Name:
		return nil, &DeployRefusal{Field: "confirm", Message: fmt.Sprintf("This deploy destroys data. Type the environment's name, %s, to confirm.", env.Name)}
	case dp.PublishesValues() && req.ConfirmPublicValue != env.Name:
		return nil, &DeployRefusal{Field: "confirm_public_value", Message: fmt.Sprintf("This deploy publishes %s in a hostname. Type the environment's name, %s, to publish it.", joinNames(dp.PublicValueNames()), env.Name)}
	}
	nr := store.NewRun{
		EnvironmentID:   env.ID,
		Kind:            store.RunDeploy,
		RevisionID:      &dp.To.ID,
		Checkpoints:     DeployCheckpoints(dp.To, dp.resolved, dp.Rolling()),
		Detail:          RunDetail{Confirmed: dp.NeedsConfirmation(), Redeploy: dp.Redeploy, Rollback: dp.Rollback || dp.Release != nil},
		ExclusiveDeploy: true,
		ClaimHostnames:  dp.claims,
		Publish:         dp.publish,
		AuditAction:     "deploy.started",
		AuditDetail: map[string]any{"revision": dp.To.Number, "confirmation": dp.NeedsConfirmation() && req.Confirm == env.Name,
			"redeploy": dp.Redeploy, "rollback": dp.Rollback},
		Enqueue: s.enqueue(),
	}
	if dp.PublishesValues() {
		// Names only: the audit log is read by people who may not read values.
		nr.AuditDetail["published_values"] = dp.PublicValueNames()
	}
	freeze, frozen, err := s.Frozen(ctx, env)
	if err != nil {
		return nil, err
	}
	if frozen && req.FreezeOverride != "" {
		switch {
		case a.User == nil || !a.User.IsAdmin:
			return nil, &DeployRefusal{Field: "freeze_override", Message: FrozenSentence(env.Name, freeze.Until, s.Now()) + ": only installation admins may override a freeze."}
		case len([]rune(strings.TrimSpace(req.FreezeOverride))) < 3:
			return nil, &DeployRefusal{Field: "freeze_override", Message: "Type why you deploy during the freeze."}
		}
		nr.AuditDetail["freeze_override"] = strings.TrimSpace(req.FreezeOverride)
		nr.AuditDetail["frozen_until"] = freeze.Until.UTC().Format(time.RFC3339)
		frozen = false
	}
	if frozen && freeze.Refuse {
		return nil, &DeployRefusal{Field: "freeze", Message: FrozenSentence(env.Name, freeze.Until, s.Now()) + ": deploys started in this window are refused. Deploy again after it ends."}
	}
	rule, err := s.DB.ProtectionRule(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	if frozen && rule == nil {
		// The run waits; its job is scheduled at the window's end, in the
		// run's creation transaction (River runs it once, after a crash too).
		until := freeze.Until
		nr.Frozen = "Frozen until " + FreezeClock(until, s.Now())
		nr.AuditDetail["frozen_until"] = until.UTC().Format(time.RFC3339)
		if at := s.enqueueAt(); at != nil {
			nr.Enqueue = func(ctx context.Context, tx pgx.Tx, runID int64) (int64, error) { return at(ctx, tx, runID, until) }
		}
	}
	if rule != nil {
		// A protected environment: the run waits for approval of this
		// plan; its job is inserted by the approval that meets the rule.
		ap, err := s.approvalPlan(ctx, env, dp)
		if err != nil {
			return nil, err
		}
		digest := ap.Digest()
		nr.WaitForApproval, nr.PlanDigest, nr.Enqueue = true, digest, nil
		nr.AfterCreate = s.enqueueExpiry(rule.Expires)
		nr.Checkpoints = append([]store.NewCheckpoint{{Kind: KindApproval, Name: "Approval",
			Detail: CheckpointDetail{Approval: &ApprovalDetail{Digest: digest, Plan: ap}}}}, nr.Checkpoints...)
		nr.AuditDetail["digest"] = digest
		nr.AuditDetail["waits_for_approval"] = rule.Approvals
	}
	if dp.From != nil {
		nr.FromRevisionID = &dp.From.ID
		nr.AuditDetail["from_revision"] = dp.From.Number
	}
	if rp := dp.Release; rp != nil {
		nr.AuditDetail["release"] = rp.RunID
		if rp.Recorded {
			nr.ReleaseOf, nr.Release = &rp.RunID, rp.values
			versions := make([]map[string]any, 0, len(rp.values))
			for _, nv := range rp.values {
				versions = append(versions, map[string]any{"name": nv.Name, "version": nv.Version})
			}
			nr.AuditDetail["values"] = versions
		}
	}
	run, err := s.DB.CreateRun(ctx, a, env, nr)
	if cc, ok := errors.AsType[*store.ClaimConflict](err); ok {
		return nil, s.claimRefusal(ctx, a, dp, cc)
	}
	return run, err
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// DeployCheckpoints lists a deploy's checkpoints in order: check values;
// provision each database and bucket; build or import each application;
// each release command; a certificate for every route with tls, every
// alias and every bucket route; roll out each application; activate.
//
// roll names the applications to build or import, whose release commands
// run and that roll out (nil: every one); the others keep running as they
// are.
func DeployCheckpoints(rev *store.Revision, hosts map[string]store.ResolvedHost, roll map[string]bool) []store.NewCheckpoint {
	def := rev.Definition
	cps := []store.NewCheckpoint{{Kind: KindCheckValues, Name: "Check values"}}
	for _, n := range slices.Sorted(maps.Keys(def.Databases)) {
		cps = append(cps, store.NewCheckpoint{Kind: KindProvisionDatabase, Name: "Provision database " + n, Detail: CheckpointDetail{Service: n}})
	}
	for _, n := range slices.Sorted(maps.Keys(def.Buckets)) {
		cps = append(cps, store.NewCheckpoint{Kind: KindProvisionBucket, Name: "Provision bucket " + n, Detail: CheckpointDetail{Service: n}})
	}
	apps := slices.DeleteFunc(slices.Sorted(maps.Keys(def.Applications)), func(n string) bool { return roll != nil && !roll[n] })
	for _, n := range apps {
		a := def.Applications[n]
		if a.Image != "" {
			cps = append(cps, store.NewCheckpoint{Kind: KindImport, Name: "Import " + n, Detail: CheckpointDetail{Application: n, Source: a.Image}})
		} else {
			cps = append(cps, store.NewCheckpoint{Kind: KindBuild, Name: "Build " + n, Detail: CheckpointDetail{Application: n, Source: a.Build.Context}})
		}
	}
	for _, n := range apps {
		a := def.Applications[n]
		if rc := a.Deployment.ReleaseCommand; rc != nil {
			cps = append(cps, store.NewCheckpoint{Kind: KindRelease, Name: "Release command " + n, Detail: CheckpointDetail{
				Application: n, Command: rc.Command, Timeout: humanize.ManifestDuration(rc.Timeout), WaitedFor: referencedServices(a)}})
		}
	}
	for _, h := range HostnameExpressions(def) {
		if h.TLS == "disabled" {
			continue
		}
		domain := hosts[h.Expression].Name
		route := h.Route
		if h.Alias {
			route = h.Application + " / " + routeName(h.Route) + " alias " + domain
		}
		cps = append(cps, store.NewCheckpoint{Kind: KindIssueTLS, Name: "Issue TLS certificate · " + route, Detail: CheckpointDetail{
			Application: h.Application, TLS: &TLSDetail{Route: route, Expression: h.Expression, Domain: domain, Policy: h.TLS}}})
	}
	for _, n := range apps {
		a := def.Applications[n]
		cps = append(cps, store.NewCheckpoint{Kind: KindRollout, Name: fmt.Sprintf("Roll out %s (%s)", n, a.Deployment.Rollout.Strategy), Detail: CheckpointDetail{
			Application: n, Strategy: a.Deployment.Rollout.Strategy, Timeout: humanize.ManifestDuration(a.Deployment.Rollout.Timeout)}})
	}
	cps = append(cps, store.NewCheckpoint{Kind: KindActivate, Name: fmt.Sprintf("Activate revision %d", rev.Number), Detail: CheckpointDetail{Revision: rev.Number}})
	return cps
}

// routeName is the route of "app / route alias host".
func routeName(route string) string {
	var app, rest string
	if _, err := fmt.Sscanf(route, "%s / %s", &app, &rest); err != nil {
		return route
	}
	return rest
}

// referencedServices names the databases and buckets an application's
// environment references, which its release command waits for.
func referencedServices(a *compiler.Application) []string {
	var out []string
	for _, v := range a.Environment {
		if m := serviceReference.FindStringSubmatch(v); m != nil {
			name := m[1][:len(m[1])-1] + " " + m[2]
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

var serviceReference = regexp.MustCompile(`^\{\{(databases|buckets)\.([^.}]+)\.`)

// Cancel asks a run to stop at its next safe point. A run that no live
// process executes (queued, waiting, or whose executor is gone) stands at
// a safe point already: it is claimed here and ends cancelled at once,
// every unfinished checkpoint marked as not run. A run that a live
// executor works on stops when that executor reaches its next safe point.
func (s *Service) Cancel(ctx context.Context, a store.Actor, env *store.Environment, runID int64) (*store.Run, error) {
	run, err := s.DB.RequestCancel(ctx, a, env, runID)
	if err != nil {
		return nil, err
	}
	if err := s.expireDeadExecutors(ctx); err != nil {
		s.Logger.Warn("cancel run: look for executors that are gone", "run", runID, "err", err)
	}
	if _, err := s.Runner.Execute(ctx, runID); err != nil && !errors.Is(err, ErrTakenOver) {
		s.Logger.Warn("cancel run", "run", runID, "err", err)
	}
	s.wake(ctx, run)
	if now, err := s.DB.RunByID(ctx, runID); err == nil {
		run = now
	}
	return run, nil
}

// wake makes a waiting run's job run now, so it notices a change.
func (s *Service) wake(ctx context.Context, run *store.Run) {
	if s.river == nil || run.JobID == nil || run.Status == store.RunRunning {
		return
	}
	if _, err := s.river.JobRetry(ctx, *run.JobID); err != nil {
		s.Logger.Warn("wake run", "run", run.ID, "err", err)
	}
}

// NextAutomaticCheck is when the periodic reconcile probes c again: the
// next reconcile tick after its last probe, counted in whole intervals so
// that it lies after now. It is false for an issued certificate, and when
// the reconciler is off.
func (s *Service) NextAutomaticCheck(c store.Certificate, now time.Time) (time.Time, bool) {
	every := s.ReconcileInterval
	if every <= 0 || c.State == store.CertIssued {
		return time.Time{}, false
	}
	if c.State == store.CertFailed && c.NextRetryAt != nil && c.NextRetryAt.After(now) {
		// A certificate in backoff waits for its retry, not for a tick.
		return *c.NextRetryAt, true
	}
	from := c.UpdatedAt
	if c.ProbedAt != nil {
		from = *c.ProbedAt
	}
	next := from.Add(every)
	if !next.After(now) {
		next = next.Add(every * (now.Sub(next)/every + 1))
	}
	return next, true
}

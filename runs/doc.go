// Package runs holds everything that happens over time: planning a deploy
// from two stored definitions (PlanDeploy), executing runs checkpoint by
// checkpoint through a platform.Platform (Runner; the platforms live in
// runs/platform: local and kubernetes), cert-manager's retry backoff, the
// reconciler that re-probes deferred and failed domains, and the River
// client that executes runs as jobs on the Studio's PostgreSQL (Service).
// The event hub that fans run events out to websockets lives beside it.
// See DESIGN.md, "The platform".
package runs

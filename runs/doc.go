// Package runs will hold everything that happens over time: planning a
// deploy from two compiled definitions, executing runs checkpoint by
// checkpoint through a Platform, certificate retry backoff, DNS probing,
// the reconciler, backup schedules and snapshots, and the event hub that
// fans run events out to websocket subscribers across replicas through
// PostgreSQL LISTEN/NOTIFY. See DESIGN.md, "The platform". It is empty
// until the deploy-runs issue lands.
package runs

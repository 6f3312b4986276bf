package compiler

import "time"

// Definition is the compiled, deployable form of a manifest: what the deploy
// planner diffs and the Studio displays. It is canonical: two manifests that
// deploy the same thing compile to equal definitions, whatever their key
// order, comments, formatting, or client-only blocks (`commands`, `dev`).
//
// Defaults. The compiler writes every documented default that has a concrete
// value into the definition (port protocol http, route path /, tls automatic,
// strategy round-robin, compress true, probe intervals/timeouts/thresholds,
// replicas min 1 and max = min, placement across nodes with preferred
// enforcement, rollout strategy blue-green or recreate with volumes, rolling
// maxUnavailable 0 and maxSurge 1, release and rollout timeouts 10m, grace
// period 30s, dockerfile Dockerfile, database isolation shared and
// availability single, bucket visibility private, versioning disabled,
// abortIncompleteUploadsAfter 1d, CORS methods GET and PUT, bucket route tls
// automatic). Writing such a default explicitly therefore never changes the
// hash. Defaults that depend on the cluster are left to the platform and
// stay zero/empty here: the platform list (empty means every application-node
// platform of the cluster), resource requests and limits (zero means none),
// database storage size (zero means the pool's platform capacity, 10GiB for
// managed pools), bucket quotas (zero means none), and an absent CORS policy
// (nil means the store's permissive preflight fallback).
type Definition struct {
	Name         string                  `json:"name"`
	Description  string                  `json:"description,omitempty"`
	Applications map[string]*Application `json:"applications,omitempty"`
	Databases    map[string]*Database    `json:"databases,omitempty"`
	Buckets      map[string]*Bucket      `json:"buckets,omitempty"`
}

// Application is one deployed workload. Exactly one of Image or Build is set.
type Application struct {
	Image string `json:"image,omitempty"`
	Build *Build `json:"build,omitempty"`
	// Platforms is sorted, because order expresses no preference; empty
	// means no restriction.
	Platforms []string `json:"platforms,omitempty"`
	// Command overrides the image command when non-empty; literal argv.
	Command []string `json:"command,omitempty"`
	// Environment maps names to their text: literal text, ${NAME}
	// expressions, or a whole-value {{service.key.output}} reference.
	Environment map[string]string  `json:"environment,omitempty"`
	Ports       map[string]*Port   `json:"ports,omitempty"`
	Routes      map[string]*Route  `json:"routes,omitempty"`
	Health      Health             `json:"health"`
	Resources   Resources          `json:"resources"`
	Scaling     Scaling            `json:"scaling"`
	Placement   Placement          `json:"placement"`
	Deployment  Deployment         `json:"deployment"`
	Shutdown    Shutdown           `json:"shutdown"`
	Volumes     map[string]*Volume `json:"volumes,omitempty"`
}

// Build describes a source build relative to the project root.
type Build struct {
	// Context is the cleaned, slash-separated path relative to the project root.
	Context string `json:"context"`
	// Dockerfile is relative to Context, as written (default "Dockerfile").
	Dockerfile string `json:"dockerfile"`
	Target     string `json:"target,omitempty"`
	// Arguments are literal build arguments converted to strings.
	Arguments map[string]string `json:"arguments,omitempty"`
}

// Port is a port the container listens on.
type Port struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"` // http, https, tcp or udp
}

// Route publishes HTTP traffic for one domain and path prefix.
type Route struct {
	// Domain is the hostname expression as written, e.g. "${APP_DOMAIN}".
	Domain string `json:"domain"`
	// Path is the cleaned path prefix (dot segments, repeated and trailing
	// slashes removed).
	Path string `json:"path"`
	// Port is the port name or number as written in the manifest.
	Port string `json:"port"`
	// TargetPort is the numeric container port the route reaches.
	TargetPort int    `json:"targetPort"`
	TLS        string `json:"tls"`      // automatic, optional or disabled
	Strategy   string `json:"strategy"` // round-robin or least-requests
	Compress   bool   `json:"compress"`
	// Aliases are redirecting hostname expressions, sorted.
	Aliases []string `json:"aliases,omitempty"`
}

// Health holds the optional probes; a nil probe is not created.
type Health struct {
	Startup   *Probe `json:"startup,omitempty"`
	Readiness *Probe `json:"readiness,omitempty"`
	Liveness  *Probe `json:"liveness,omitempty"`
}

// Probe is an HTTP health check with its defaults applied.
type Probe struct {
	Port             string        `json:"port"`
	TargetPort       int           `json:"targetPort"`
	Path             string        `json:"path"`
	Interval         time.Duration `json:"interval"`
	Timeout          time.Duration `json:"timeout"`
	FailureThreshold int           `json:"failureThreshold"`
}

// Resources holds per-replica requests and limits; zero values are unset.
type Resources struct {
	Requests ResourceAmounts `json:"requests"`
	Limits   ResourceAmounts `json:"limits"`
}

// ResourceAmounts is one side of Resources; zero means not declared.
type ResourceAmounts struct {
	CPU              MilliCPU `json:"cpu,omitempty"`
	Memory           ByteSize `json:"memory,omitempty"`
	TemporaryStorage ByteSize `json:"temporaryStorage,omitempty"`
}

// Scaling is the replica range; Min == Max means a fixed count.
type Scaling struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// TargetCPUUtilization is the autoscaling target in percent, 0 when the
	// count is fixed.
	TargetCPUUtilization int `json:"targetCPUUtilization,omitempty"`
}

// Placement is the topology spread policy.
type Placement struct {
	Across      string `json:"across"`      // nodes or zones
	Minimum     int    `json:"minimum"`     // 0 when unset
	Enforcement string `json:"enforcement"` // preferred or required
}

// Deployment is the release hook and rollout policy.
type Deployment struct {
	// ReleaseCommand is nil when no release hook is declared.
	ReleaseCommand *ReleaseCommand `json:"releaseCommand,omitempty"`
	Rollout        Rollout         `json:"rollout"`
}

// ReleaseCommand is the one-off hook run before activation.
type ReleaseCommand struct {
	Command []string      `json:"command"`
	Timeout time.Duration `json:"timeout"`
}

// Rollout is how a new version replaces the old one. MaxUnavailable and
// MaxSurge are set only for the rolling strategy.
type Rollout struct {
	Strategy       string        `json:"strategy"` // blue-green, rolling or recreate
	MaxUnavailable *int          `json:"maxUnavailable,omitempty"`
	MaxSurge       *int          `json:"maxSurge,omitempty"`
	Timeout        time.Duration `json:"timeout"`
}

// Shutdown controls container termination.
type Shutdown struct {
	GracePeriod time.Duration `json:"gracePeriod"`
}

// Volume is a persistent volume mounted read/write.
type Volume struct {
	MountPath string   `json:"mountPath"`
	Size      ByteSize `json:"size"`
}

// Database is a managed PostgreSQL database.
type Database struct {
	Engine       string `json:"engine"`       // postgres
	Version      int    `json:"version"`      // 17 or 18
	Isolation    string `json:"isolation"`    // shared, project or dedicated
	Availability string `json:"availability"` // single, asynchronous or synchronous
	// StorageSize is zero when the platform's pool capacity applies.
	StorageSize ByteSize `json:"storageSize,omitempty"`
	// Extensions is sorted.
	Extensions []string `json:"extensions,omitempty"`
	// RecoveryPointInTime is recorded intent only; zero when unset.
	RecoveryPointInTime time.Duration `json:"recoveryPointInTime,omitempty"`
}

// Bucket is a managed S3-compatible bucket.
type Bucket struct {
	Visibility string `json:"visibility"` // private or public-read
	// Quotas: zero means no quota.
	Quotas     BucketQuotas    `json:"quotas"`
	Versioning string          `json:"versioning"` // disabled or enabled
	Lifecycle  BucketLifecycle `json:"lifecycle"`
	// CORS is nil when the store's permissive fallback applies.
	CORS  *CORS        `json:"cors,omitempty"`
	Route *BucketRoute `json:"route,omitempty"`
}

// BucketQuotas limits a bucket; zero fields impose nothing.
type BucketQuotas struct {
	Storage       ByteSize `json:"storage,omitempty"`
	Objects       int64    `json:"objects,omitempty"`
	MaxObjectSize ByteSize `json:"maxObjectSize,omitempty"`
}

// BucketLifecycle is the bucket's cleanup policy.
type BucketLifecycle struct {
	AbortIncompleteUploadsAfter   time.Duration `json:"abortIncompleteUploadsAfter"`
	ExpireNoncurrentVersionsAfter time.Duration `json:"expireNoncurrentVersionsAfter,omitempty"`
}

// CORS is a declared browser access policy; lists are sorted, methods uppercase.
type CORS struct {
	AllowedOrigins []string `json:"allowedOrigins"`
	AllowedMethods []string `json:"allowedMethods"`
	AllowedHeaders []string `json:"allowedHeaders,omitempty"`
	ExposeHeaders  []string `json:"exposeHeaders,omitempty"`
	// MaxAge is whole seconds; zero means no preflight caching.
	MaxAge time.Duration `json:"maxAge"`
}

// BucketRoute publishes a bucket on a hostname through the edge.
type BucketRoute struct {
	Domain string `json:"domain"`
	TLS    string `json:"tls"`
}

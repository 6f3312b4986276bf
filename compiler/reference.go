package compiler

import "strings"

// This file is the one table of skali.yaml's keys: every mapping the
// reference defines, its keys with a one-line description, the type of each
// value and, for an enumeration, its allowed values. The rules read their
// allowed keys (the unknown-field check) and allowed values (the enum
// checks) from it through fieldNames and fieldValues, and the JSON Schema
// (Schema) and the editor's help are generated from it, so there is no
// second copy to drift.

// ValueType is the type of a key's value as the reference states it.
type ValueType string

// The value types.
const (
	TypeString   ValueType = "string"   // a YAML string
	TypeInteger  ValueType = "integer"  // a YAML integer
	TypeBoolean  ValueType = "boolean"  // true or false
	TypeScalar   ValueType = "scalar"   // any scalar, taken as its text
	TypeEnum     ValueType = "enum"     // one of Values
	TypeSize     ValueType = "size"     // a byte size such as "512MB" or "20GB"
	TypeDuration ValueType = "duration" // a duration such as "30s", "5m" or "2d"
	TypeCPU      ValueType = "cpu"      // CPUs as a number (0.5) or millicores ("500m")
	TypePort     ValueType = "port"     // a named port of the application or a number
	TypeArgv     ValueType = "argv"     // a list of scalars run without a shell
	TypeObject   ValueType = "object"   // a mapping of the keys in Fields
	TypeMap      ValueType = "map"      // a mapping of names the author picks to Entry
	TypeList     ValueType = "list"     // a list of Entry
)

// Key is one key of skali.yaml.
type Key struct {
	Name string
	// Doc is the key's one-line description.
	Doc  string
	Type ValueType
	// Values are the allowed values of an enumeration (TypeEnum, or a
	// list's entries).
	Values []string
	// Fields are the keys of an object.
	Fields []*Key
	// Entry describes each value of a map or each item of a list.
	Entry *Key
	// CaseInsensitive is true for an enumeration whose values are taken in
	// any case (HTTP methods).
	CaseInsensitive bool
	// Required is true for a key the compiler reports when it is missing
	// everywhere (some keys are required only with others).
	Required bool
}

func obj(name, doc string, fields ...*Key) *Key {
	return &Key{Name: name, Doc: doc, Type: TypeObject, Fields: fields}
}

func named(name, doc string, entry *Key) *Key {
	return &Key{Name: name, Doc: doc, Type: TypeMap, Entry: entry}
}

func list(name, doc string, entry *Key) *Key {
	return &Key{Name: name, Doc: doc, Type: TypeList, Entry: entry}
}

func leaf(name string, t ValueType, doc string, values ...string) *Key {
	return &Key{Name: name, Doc: doc, Type: t, Values: values}
}

func required(f *Key) *Key { f.Required = true; return f }

var probe = obj("", "A probe.",
	required(obj("http", "Checks the probe with an HTTP GET; a 2xx or 3xx answer passes.",
		required(leaf("port", TypePort, "The port probed: a named port of this application or a number.")),
		required(leaf("path", TypeString, "The path requested, starting with `/`.")),
	)),
	leaf("interval", TypeDuration, "How often the probe runs, such as `10s`."),
	leaf("timeout", TypeDuration, "How long one probe may take before it counts as failed."),
	leaf("failureThreshold", TypeInteger, "How many failures in a row mark the probe failed."),
)

func probeField(name, doc string) *Key {
	f := *probe
	f.Name, f.Doc = name, doc
	return &f
}

var amounts = func(name, doc string) *Key {
	return obj(name, doc,
		leaf("cpu", TypeCPU, "CPUs, as a number (`0.5`) or millicores (`500m`)."),
		leaf("memory", TypeSize, "Memory, such as `256MB` or `1GB`."),
		leaf("temporaryStorage", TypeSize, "Scratch disk space, such as `1GB`."),
	)
}

// Reference is the root of skali.yaml: its top-level keys.
var Reference = obj("", "A Skali project: its applications, databases and buckets.",
	required(leaf("name", TypeString, "The project's name: lowercase letters, digits and `-`, starting with a letter.")),
	leaf("description", TypeString, "A one-line description of the project."),
	named("applications", "The project's applications, by name.", obj("", "An application: a container image or a build, and how it runs.",
		leaf("image", TypeString, "The container image to run, such as `ghcr.io/acme/web:1.4.2`; or give `build`."),
		obj("build", "Builds the image from source instead of naming one.",
			required(leaf("context", TypeString, "The build context relative to the project root, such as `.`.")),
			leaf("dockerfile", TypeString, "The Dockerfile relative to the context; `Dockerfile` by default."),
			leaf("target", TypeString, "The stage of a multi-stage Dockerfile to build."),
			named("arguments", "Build arguments, by name.", leaf("", TypeScalar, "A build argument's value.")),
		),
		&Key{Name: "platforms", Doc: "The platforms to build or pull for.", Type: TypeList,
			Entry: leaf("", TypeEnum, "A platform.", "linux/amd64", "linux/arm64")},
		leaf("command", TypeArgv, "Overrides the image's command, as an argv list such as [\"/app/web\", \"serve\"]."),
		named("environment", "Environment variables, by name; values may use `${VALUE}` and `{{service.output}}`.", leaf("", TypeScalar, "A variable's value.")),
		named("ports", "The ports the application listens on, by name.", obj("", "A port.",
			required(leaf("port", TypeInteger, "The container port, 1 to 65535.")),
			leaf("protocol", TypeEnum, "The port's protocol; `http` by default.", "http", "https", "tcp", "udp"),
		)),
		named("routes", "Public routes to the application, by name.", obj("", "A route from a domain to a port.",
			required(leaf("domain", TypeString, "The domain served, such as `${APP_DOMAIN}`.")),
			leaf("path", TypeString, "The path prefix routed, `/` by default."),
			required(leaf("port", TypePort, "The port routed to: a named port of this application or a number.")),
			leaf("tls", TypeEnum, "How the route serves TLS; `automatic` by default.", "automatic", "optional", "disabled"),
			leaf("strategy", TypeEnum, "How requests are spread over replicas.", "round-robin", "least-requests"),
			leaf("compress", TypeBoolean, "Compresses responses."),
			list("aliases", "More domains served by the same route.", leaf("", TypeString, "A domain.")),
		)),
		obj("health", "Health probes.",
			probeField("startup", "Holds the other probes until the application has started."),
			probeField("readiness", "Takes a replica out of the routes while it fails."),
			probeField("liveness", "Restarts a replica that fails it."),
		),
		obj("resources", "CPU, memory and scratch space per replica.",
			amounts("requests", "What each replica is guaranteed."),
			amounts("limits", "The most each replica may use."),
		),
		obj("scaling", "How many replicas run.",
			obj("replicas", "The number of replicas.",
				leaf("min", TypeInteger, "The fewest replicas."),
				leaf("max", TypeInteger, "The most replicas, with autoscaling."),
			),
			obj("autoscaling", "Adds replicas under load, up to replicas.max.",
				obj("cpu", "Scales on CPU use.",
					leaf("targetUtilization", TypeInteger, "The CPU use to keep replicas at, in percent of requests."),
				),
			),
		),
		obj("placement", "Where replicas are placed.",
			obj("spread", "Spreads replicas over nodes or zones.",
				leaf("across", TypeEnum, "What replicas are spread across.", "nodes", "zones"),
				leaf("minimum", TypeInteger, "The fewest distinct nodes or zones."),
				leaf("enforcement", TypeEnum, "Whether the spread is a preference or a requirement.", "preferred", "required"),
			),
		),
		obj("deployment", "How a new version replaces the running one.",
			obj("releaseCommand", "A command run once before each release, such as migrations.",
				leaf("command", TypeArgv, "The command, as an argv list."),
				leaf("timeout", TypeDuration, "How long the command may run."),
			),
			obj("rollout", "How replicas are replaced.",
				leaf("strategy", TypeEnum, "The rollout strategy.", "blue-green", "rolling", "recreate"),
				leaf("maxUnavailable", TypeInteger, "Rolling: how many replicas may be down at once."),
				leaf("maxSurge", TypeInteger, "Rolling: how many extra replicas may start at once."),
				leaf("timeout", TypeDuration, "How long the rollout may take before it is rolled back."),
			),
		),
		obj("shutdown", "How a replica stops.",
			leaf("gracePeriod", TypeDuration, "How long a replica has to stop after SIGTERM."),
		),
		named("volumes", "Persistent volumes, by name.", obj("", "A volume.",
			required(leaf("mountPath", TypeString, "Where the volume is mounted in the container.")),
			required(leaf("size", TypeSize, "The volume's size, such as `5GB`.")),
		)),
		named("commands", "One-off commands an operator may run, by name, as argv lists.", leaf("", TypeArgv, "A command.")),
		obj("dev", "Local development with the skali client only.",
			required(leaf("command", TypeArgv, "The host dev server's argv, such as [bun, run, dev].")),
			named("ports", "The dev server's port for each declared port, by name.", leaf("", TypeInteger, "A host port.")),
		),
	)),
	named("databases", "Managed PostgreSQL databases, by name.", obj("", "A managed database.",
		required(leaf("engine", TypeEnum, "The database engine.", "postgres")),
		required(leaf("version", TypeScalar, "The PostgreSQL major, 17 or 18.")),
		leaf("isolation", TypeEnum, "How the database is isolated from other projects.", "shared", "project", "dedicated"),
		leaf("availability", TypeEnum, "Replication for failover.", "single", "asynchronous", "synchronous"),
		obj("storage", "The database's disk.",
			leaf("size", TypeSize, "The disk size, such as `20GB`."),
		),
		&Key{Name: "extensions", Doc: "PostgreSQL extensions to create.", Type: TypeList,
			Entry: leaf("", TypeEnum, "An extension.", "btree_gin", "btree_gist", "citext", "cube", "earthdistance", "fuzzystrmatch",
				"hstore", "intarray", "ltree", "pg_stat_statements", "pg_trgm", "pgcrypto",
				"tablefunc", "unaccent", "uuid-ossp", "vector")},
		obj("recovery", "Backups for recovery.",
			leaf("pointInTime", TypeDuration, "How far back point-in-time recovery reaches, such as `7d`."),
		),
	)),
	named("buckets", "S3-compatible object storage buckets, by name.", obj("", "A bucket.",
		leaf("visibility", TypeEnum, "Who may read objects; `private` by default.", "private", "public-read"),
		obj("quotas", "Limits on what the bucket holds.",
			leaf("storage", TypeSize, "The most bytes stored, such as `100GB`."),
			leaf("objects", TypeInteger, "The most objects stored."),
			leaf("maxObjectSize", TypeSize, "The largest object, such as `5GB`."),
		),
		leaf("versioning", TypeEnum, "Keeps earlier versions of overwritten objects.", "disabled", "enabled"),
		obj("lifecycle", "Automatic clean-up.",
			leaf("abortIncompleteUploadsAfter", TypeDuration, "Aborts multipart uploads left unfinished this long."),
			leaf("expireNoncurrentVersionsAfter", TypeDuration, "Deletes earlier versions this long after they are replaced."),
		),
		obj("cors", "Cross-origin access from browsers.",
			required(list("allowedOrigins", "The origins allowed, such as `https://app.example.com`, or `*`.", leaf("", TypeString, "An origin."))),
			&Key{Name: "allowedMethods", Doc: "The methods allowed; GET and PUT by default.", Type: TypeList,
				Entry: &Key{Type: TypeEnum, Doc: "A method, in any case.", Values: []string{"GET", "PUT", "POST", "DELETE", "HEAD"}, CaseInsensitive: true}},
			list("allowedHeaders", "Request headers allowed.", leaf("", TypeString, "A header.")),
			list("exposeHeaders", "Response headers exposed to scripts.", leaf("", TypeString, "A header.")),
			leaf("maxAge", TypeDuration, "How long browsers cache the answer to a preflight."),
		),
		obj("route", "Serves the bucket on a domain of its own.",
			required(leaf("domain", TypeString, "The domain served.")),
			leaf("tls", TypeEnum, "How the route serves TLS; `automatic` by default.", "automatic", "optional", "disabled"),
		),
	)),
)

// Lookup returns the field at a dotted path of the reference, with `*` for
// a map's entry or a list's item ("applications.*.routes.*.tls"), or nil.
func Lookup(path string) *Key {
	f := Reference
	if path == "" {
		return f
	}
	for _, part := range strings.Split(path, ".") {
		switch {
		case f == nil:
			return nil
		case part == "*":
			f = f.Entry
		default:
			var next *Key
			for _, k := range f.Fields {
				if k.Name == part {
					next = k
					break
				}
			}
			f = next
		}
	}
	return f
}

// fieldNames returns the keys of the object at path, for the rules'
// unknown-field checks. A path missing from the table is a programming
// error and panics at start-up, so a test run catches it.
func fieldNames(path string) []string {
	f := Lookup(path)
	if f == nil || f.Type != TypeObject {
		panic("compiler: reference has no object at " + path)
	}
	out := make([]string, len(f.Fields))
	for i, k := range f.Fields {
		out[i] = k.Name
	}
	return out
}

// fieldValues returns the allowed values at path (an enumeration, or a
// list of one), for the rules' enum checks.
func fieldValues(path string) []string {
	f := Lookup(path)
	if f != nil && f.Type == TypeList && f.Entry != nil {
		f = f.Entry
	}
	if f == nil || len(f.Values) == 0 {
		panic("compiler: reference has no allowed values at " + path)
	}
	return f.Values
}

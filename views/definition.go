package views

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/skali-dev/studio/compiler"
	"github.com/skali-dev/studio/humanize"
)

// NewApplicationView describes an application for the environment page;
// host shows each hostname expression (resolved or not).
func NewApplicationView(name string, a *compiler.Application, host func(string) HostView) ApplicationView {
	v := ApplicationView{Name: name}
	if a.Image != "" {
		v.Source, v.IsImage = a.Image, true
	} else if a.Build != nil {
		v.Source = a.Build.Context + " (" + a.Build.Dockerfile
		if a.Build.Target != "" {
			v.Source += ", target " + a.Build.Target
		}
		v.Source += ")"
	}
	for _, pn := range slices.Sorted(maps.Keys(a.Ports)) {
		p := a.Ports[pn]
		v.Ports = append(v.Ports, fmt.Sprintf("%s %d/%s", pn, p.Port, p.Protocol))
	}
	for _, rn := range slices.Sorted(maps.Keys(a.Routes)) {
		rt := a.Routes[rn]
		rv := RouteView{Name: rn, Domain: host(rt.Domain), Path: rt.Path, Port: fmt.Sprintf("%s (%d)", rt.Port, rt.TargetPort), TLS: rt.TLS}
		if rt.Port == strconv.Itoa(rt.TargetPort) {
			rv.Port = rt.Port
		}
		for _, al := range rt.Aliases {
			rv.Aliases = append(rv.Aliases, host(al))
		}
		v.Routes = append(v.Routes, rv)
	}
	v.Replicas, v.Autoscaling = replicaRange(a.Scaling), autoscaling(a.Scaling)
	return v
}

// NewDatabaseView describes a database as label/value settings.
func NewDatabaseView(name string, d *compiler.Database) ServiceView {
	v := ServiceView{Name: name, Settings: []Setting{
		{Label: "Engine", Value: fmt.Sprintf("%s %d", d.Engine, d.Version)},
		{Label: "Isolation", Value: d.Isolation},
		{Label: "Availability", Value: d.Availability},
	}}
	size := "platform default"
	if s := storageSize(d.StorageSize); s != "" {
		size = s
	}
	v.Settings = append(v.Settings, Setting{Label: "Storage", Value: size})
	if len(d.Extensions) > 0 {
		v.Settings = append(v.Settings, Setting{Label: "Extensions", Value: strings.Join(d.Extensions, ", ")})
	}
	return v
}

// NewBucketView describes a bucket as label/value settings; host shows its
// route's hostname.
func NewBucketView(name string, b *compiler.Bucket, host func(string) HostView) ServiceView {
	quota := "none"
	if q := bucketQuota(b.Quotas); q != "" {
		quota = q
	}
	v := ServiceView{Name: name, Settings: []Setting{
		{Label: "Visibility", Value: b.Visibility},
		{Label: "Storage quota", Value: quota},
		{Label: "Versioning", Value: b.Versioning},
		{Label: "Abort uploads after", Value: humanize.ManifestDuration(b.Lifecycle.AbortIncompleteUploadsAfter)},
	}}
	if b.CORS != nil {
		v.Settings = append(v.Settings, Setting{Label: "CORS origins", Value: strings.Join(b.CORS.AllowedOrigins, ", ")})
	}
	if b.Route != nil {
		hv := host(b.Route.Domain)
		v.Route = &hv
	}
	return v
}

// The wording both the environment page and the validator use for the same
// parts of a definition.

// replicaRange is "2" for a fixed count or "2–5" for a range.
func replicaRange(s compiler.Scaling) string {
	r := strconv.Itoa(s.Min)
	if s.Max != s.Min {
		r += "–" + strconv.Itoa(s.Max)
	}
	return r
}

// autoscaling is "CPU 70%" when the range autoscales, else "".
func autoscaling(s compiler.Scaling) string {
	if s.TargetCPUUtilization == 0 {
		return ""
	}
	return "CPU " + strconv.Itoa(s.TargetCPUUtilization) + "%"
}

// storageSize is a database's declared storage, or "" for the platform's.
func storageSize(b compiler.ByteSize) string {
	if b == 0 {
		return ""
	}
	return b.String()
}

// bucketQuota lists a bucket's quotas ("10GB storage, 5000 objects"), or "".
func bucketQuota(q compiler.BucketQuotas) string {
	var parts []string
	if q.Storage != 0 {
		parts = append(parts, q.Storage.String()+" storage")
	}
	if q.Objects != 0 {
		parts = append(parts, strconv.FormatInt(q.Objects, 10)+" objects")
	}
	if q.MaxObjectSize != 0 {
		parts = append(parts, q.MaxObjectSize.String()+" per object")
	}
	return strings.Join(parts, ", ")
}

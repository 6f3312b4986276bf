package compiler

import (
	"slices"
	"sort"

	"github.com/skali-dev/studio/compiler/internal/check"
	"go.yaml.in/yaml/v3"
)

var (
	databaseFields = fieldNames("databases.*")
	isolations     = fieldValues("databases.*.isolation")
	availabilities = fieldValues("databases.*.availability")
	engines        = fieldValues("databases.*.engine")
	storageFields  = fieldNames("databases.*.storage")
	recoveryFields = fieldNames("databases.*.recovery")
	// extensionCatalog is the bundled catalog, available on both majors.
	extensionCatalog = fieldValues("databases.*.extensions")
)

// database checks one managed database.
func (c *checker) database(n *yaml.Node, p pathT) *Database {
	o, ok := c.object(n, p, databaseFields)
	if !ok {
		return nil
	}
	db := &Database{Isolation: "shared", Availability: "single"}
	if v := o.get("engine"); v == nil {
		c.missing(o, "engine", "`engine: postgres` is the only engine")
	} else if s, ok := c.enum(v, o.at("engine"), engines); ok {
		db.Engine = s
	}
	if v := o.get("version"); v == nil {
		c.missing(o, "version", "the PostgreSQL major, 17 or 18")
	} else {
		tag := v.ShortTag()
		switch {
		case v.Kind == yaml.ScalarNode && (tag == "!!int" || tag == "!!str") && (v.Value == "17" || v.Value == "18"):
			db.Version = int(v.Value[1]-'0') + 10
		case v.Kind == yaml.ScalarNode && tag != "!!null":
			c.errorf(v, o.at("version"), "PostgreSQL version `"+v.Value+"` is not supported; expected `17` or `18`")
		default:
			c.errorf(v, o.at("version"), "expected the PostgreSQL major 17 or 18, got "+kindName(v))
		}
	}
	if v := o.get("isolation"); v != nil {
		if s, ok := c.enum(v, o.at("isolation"), isolations); ok {
			db.Isolation = s
		}
	}
	if v := o.get("availability"); v != nil {
		if s, ok := c.enum(v, o.at("availability"), availabilities); ok {
			db.Availability = s
		}
	}
	if v := o.get("storage"); v != nil {
		if so, ok := c.object(v, o.at("storage"), storageFields); ok {
			if sv := so.get("size"); sv != nil {
				db.StorageSize, _ = c.byteSize(sv, so.at("size"))
			}
		}
	}
	if v := o.get("extensions"); v != nil {
		ep := o.at("extensions")
		for i, it := range c.stringList(v, ep) {
			ip := index(ep, indexOf(v, it, i))
			name := it.Value
			if !slices.Contains(extensionCatalog, name) {
				msg := "extension `" + name + "` is not in the catalog"
				if name == "postgis" {
					msg += "; postgis is not supported yet"
				} else {
					msg += check.Suggestion(name, extensionCatalog, "supported extensions")
				}
				c.errorf(it, ip, msg)
				continue
			}
			if slices.Contains(db.Extensions, name) {
				c.errorf(it, ip, "extension `"+name+"` is listed twice")
				continue
			}
			db.Extensions = append(db.Extensions, name)
		}
		sort.Strings(db.Extensions)
	}
	if v := o.get("recovery"); v != nil {
		if ro, ok := c.object(v, o.at("recovery"), recoveryFields); ok {
			if pv := ro.get("pointInTime"); pv != nil {
				db.RecoveryPointInTime, _ = c.duration(pv, ro.at("pointInTime"), true)
			}
		}
	}
	return db
}

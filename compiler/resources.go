package compiler

// Checks of the reference section "Resources, scaling and placement".

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// resources checks requests and limits, and that no request exceeds its limit.
func (c *checker) resources(n *yaml.Node, p pathT) Resources {
	var r Resources
	o, ok := c.object(n, p, resourceFields)
	if !ok {
		return r
	}
	var reqNodes [3]*yaml.Node
	var reqObj object
	if v := o.get("requests"); v != nil {
		reqObj, _ = c.object(v, o.at("requests"), amountFields)
		r.Requests, reqNodes = c.amounts(reqObj)
	}
	if v := o.get("limits"); v != nil {
		lo, _ := c.object(v, o.at("limits"), amountFields)
		r.Limits, _ = c.amounts(lo)
	}
	rq, lm := r.Requests, r.Limits
	if rq.CPU > 0 && lm.CPU > 0 && rq.CPU > lm.CPU {
		c.errorf(reqNodes[0], reqObj.at("cpu"), "CPU request "+rq.CPU.String()+" exceeds the CPU limit "+lm.CPU.String())
	}
	if rq.Memory > 0 && lm.Memory > 0 && rq.Memory > lm.Memory {
		c.errorf(reqNodes[1], reqObj.at("memory"), "memory request "+rq.Memory.String()+" exceeds the memory limit "+lm.Memory.String())
	}
	if rq.TemporaryStorage > 0 && lm.TemporaryStorage > 0 && rq.TemporaryStorage > lm.TemporaryStorage {
		c.errorf(reqNodes[2], reqObj.at("temporaryStorage"), "temporaryStorage request "+rq.TemporaryStorage.String()+" exceeds the temporaryStorage limit "+lm.TemporaryStorage.String())
	}
	return r
}

func (c *checker) amounts(o object) (ResourceAmounts, [3]*yaml.Node) {
	var a ResourceAmounts
	var nodes [3]*yaml.Node
	if v := o.get("cpu"); v != nil {
		nodes[0] = v
		a.CPU, _ = c.cpu(v, o.at("cpu"))
	}
	if v := o.get("memory"); v != nil {
		nodes[1] = v
		a.Memory, _ = c.byteSize(v, o.at("memory"))
	}
	if v := o.get("temporaryStorage"); v != nil {
		nodes[2] = v
		a.TemporaryStorage, _ = c.byteSize(v, o.at("temporaryStorage"))
	}
	return a, nodes
}

// scaling checks the replica range and the autoscaling policy, which are
// declared together or not at all.
func (c *checker) scaling(n *yaml.Node, p pathT, s *Scaling) (object, *yaml.Node) {
	o, ok := c.object(n, p, scalingFields)
	if !ok {
		return o, nil
	}
	var maxNode *yaml.Node
	minOK, maxOK := true, true
	maxSet := false
	replicas := o
	if v := o.get("replicas"); v != nil {
		ro, ok := c.object(v, o.at("replicas"), replicaFields)
		if ok {
			replicas = ro
			if m := ro.get("min"); m != nil {
				if x, ok := c.intRange(m, ro.at("min"), 1, 1<<31-1, "use at least 1 replica"); ok {
					s.Min = x
				} else {
					minOK = false
				}
			}
			if m := ro.get("max"); m != nil {
				maxNode = m
				if x, ok := c.intRange(m, ro.at("max"), 1, 1<<31-1, "use at least 1 replica"); ok {
					s.Max, maxSet = x, true
				} else {
					maxOK = false
				}
			}
		}
	}
	if !maxSet {
		s.Max = s.Min
	} else if minOK && s.Max < s.Min {
		c.errorf(maxNode, replicas.at("max"), "max "+strconv.Itoa(s.Max)+" is below min "+strconv.Itoa(s.Min)+"; max must be at least min")
		maxOK = false
	}

	target, targetPath := 0, pathT{}
	var targetNode *yaml.Node
	deepest := o
	if v := o.get("autoscaling"); v != nil {
		if ao, ok := c.object(v, o.at("autoscaling"), fieldNames("applications.*.scaling.autoscaling")); ok {
			deepest = ao
			if cv := ao.get("cpu"); cv != nil {
				if co, ok := c.object(cv, ao.at("cpu"), fieldNames("applications.*.scaling.autoscaling.cpu")); ok {
					deepest = co
					if t := co.get("targetUtilization"); t != nil {
						targetNode, targetPath = t, co.at("targetUtilization")
						if x, ok := c.intRange(t, targetPath, 1, 100, "targetUtilization is a percentage from 1 to 100"); ok {
							target = x
						} else {
							target = -1
						}
					}
				}
			}
		}
	}
	if !minOK || !maxOK {
		return o, maxNode
	}
	switch {
	case s.Max > s.Min && targetNode == nil:
		// A missing required key is reported at the line of its parent:
		// the deepest of scaling, autoscaling and cpu that is written.
		c.errorf(c.parentKey(deepest), join(p, "autoscaling.cpu.targetUtilization"),
			"max "+strconv.Itoa(s.Max)+" above min "+strconv.Itoa(s.Min)+" requires CPU autoscaling; declare scaling.autoscaling.cpu.targetUtilization, or set max equal to min for a fixed count")
	case s.Max == s.Min && targetNode != nil:
		c.errorf(targetNode, targetPath, "autoscaling needs a replica range; set replicas.max above replicas.min ("+strconv.Itoa(s.Min)+") or remove autoscaling for a fixed count")
	case target > 0:
		s.TargetCPUUtilization = target
	}
	return o, maxNode
}

// placement checks the spread policy.
func (c *checker) placement(n *yaml.Node, p pathT, pl *Placement) {
	o, ok := c.object(n, p, placementFields)
	if !ok {
		return
	}
	v := o.get("spread")
	if v == nil {
		return
	}
	so, ok := c.object(v, o.at("spread"), spreadFields)
	if !ok {
		return
	}
	if v := so.get("across"); v != nil {
		if s, ok := c.enum(v, so.at("across"), fieldValues("applications.*.placement.spread.across")); ok {
			pl.Across = s
		}
	}
	if v := so.get("minimum"); v != nil {
		if x, ok := c.intRange(v, so.at("minimum"), 0, 1<<31-1, "minimum is a nonnegative integer"); ok {
			pl.Minimum = x
		}
	}
	if v := so.get("enforcement"); v != nil {
		if s, ok := c.enum(v, so.at("enforcement"), fieldValues("applications.*.placement.spread.enforcement")); ok {
			pl.Enforcement = s
		}
	}
}

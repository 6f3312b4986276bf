package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/skali-dev/studio/runs/platform"
)

// Bounds of a release Job's log kept as a step's output.
const (
	jobLogLines = 1000
	jobLogBytes = 1 << 20
)

// jobOutput writes what a finished release Job printed to out: its pod's
// log lines (the last jobLogLines, at most jobLogBytes) when the cluster
// keeps them, else, as with simulated nodes that have none, the Job's
// conditions. Out masks what must not be shown; nothing here is logged.
func (p *Platform) jobOutput(ctx context.Context, namespace, name string, out platform.Output) {
	pods, err := p.Client.List(ctx, KindPod, namespace, "job-name="+name)
	logged := false
	if err == nil {
		for _, pod := range pods {
			md, _ := pod["metadata"].(Object)
			pn, _ := md["name"].(string)
			if n, err := p.podLog(ctx, namespace, pn, out); err == nil && n > 0 {
				logged = true
			}
		}
	}
	if logged {
		return
	}
	job, err := p.Client.Get(ctx, KindJob, namespace, name)
	if err != nil {
		return
	}
	for _, c := range conditions(job) {
		out.Line(conditionLine(fmt.Sprintf("Job %s/%s %s", namespace, name, c.typ), c))
	}
}

// podLog writes a pod's log lines to out and returns how many it wrote.
func (p *Platform) podLog(ctx context.Context, namespace, pod string, out platform.Output) (int, error) {
	q := url.Values{"tailLines": {fmt.Sprint(jobLogLines)}, "limitBytes": {fmt.Sprint(jobLogBytes)}}
	resp, err := p.Client.do(ctx, http.MethodGet, KindPod.path(namespace, pod)+"/log?"+q.Encode(), "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	n := 0
	for sc.Scan() {
		out.Line(sc.Text())
		n++
	}
	return n, sc.Err()
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// stream times the busy environment's event stream as its page opens it,
// signed in (the session cookie, the Studio's own origin): from dialling
// with ?after=N, N being n events before the last, until the frame of the
// last event has arrived. n = 1 is the first frame a page waits for; a
// larger n is the replay a page that was away catches up with.
func (inst *installation) stream(n int64) (time.Duration, int, int, error) {
	ctx := context.Background()
	var last int64
	if err := inst.db.Pool.QueryRow(ctx, `SELECT last_event_seq FROM environments WHERE id = $1`, inst.busy.ID).Scan(&last); err != nil {
		return 0, 0, 0, err
	}
	path := fmt.Sprintf("/projects/shop/environments/production/events?after=%d", max(0, last-n))
	h := http.Header{"Origin": {inst.url}}
	req, _ := http.NewRequest(http.MethodGet, inst.url+path, nil)
	for _, c := range inst.client.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	h.Set("Cookie", req.Header.Get("Cookie"))
	start := time.Now()
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(inst.url, "http")+path, h)
	if err != nil {
		if resp != nil {
			return 0, 0, resp.StatusCode, fmt.Errorf("dial %s: %w (%s)", path, err, resp.Status)
		}
		return 0, 0, 0, fmt.Errorf("dial %s: %w", path, err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	size := 0
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return 0, size, 0, fmt.Errorf("read %s after %d bytes: %w", path, size, err)
		}
		size += len(data)
		var f struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			return 0, size, 0, fmt.Errorf("frame of %s: %w", path, err)
		}
		if f.Seq >= last {
			// 200: the handshake's 101 and every frame up to the last.
			return time.Since(start), size, http.StatusOK, nil
		}
	}
}

// startDeploy times what a person (or CI) waits for when starting a
// deploy: POST /api/v1/.../deploys answering 201 with the run, which plans
// the deploy and creates the run, its checkpoints, its audit record and
// its event in one transaction. The bench runs no River client (it would
// execute the runs while other pages are timed), so the job row River
// would insert in that transaction is not written. Afterwards, untimed, the
// run is marked cancelled so that the next deploy may start.
func (inst *installation) startDeploy() (time.Duration, int, int, error) {
	req, err := http.NewRequest(http.MethodPost, inst.url+"/api/v1/projects/shop/environments/production/deploys", strings.NewReader(`{"redeploy": true}`))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+inst.token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	if resp.StatusCode != http.StatusCreated {
		return d, body.Len(), resp.StatusCode, fmt.Errorf("start a deploy: %s: %.300s", resp.Status, body.String())
	}
	_, err = inst.db.Pool.Exec(context.Background(), `UPDATE runs SET status = 'cancelled', finished_at = now()
		WHERE environment_id = $1 AND kind = 'deploy' AND finished_at IS NULL`, inst.busy.ID)
	return d, body.Len(), resp.StatusCode, err
}

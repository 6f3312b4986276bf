package web_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/web/webtest"
)

// TestAPIWalkedAgainstItsOpenAPIDocument calls every operation of the
// document served at /api/v1/openapi.json, with answers that succeed and
// answers that are refused, and checks each request and each real answer
// (status, content type, body) against the document.
func TestAPIWalkedAgainstItsOpenAPIDocument(t *testing.T) {
	t.Parallel()
	dns := &webtest.Resolver{}
	s := webtest.Start(t, webtest.WithAdmins("root@example.test"), webtest.WithDeploys(&webtest.Deploys{Resolver: dns}))
	prod := s.CreateEnvironment(t, "", "production")
	s.CreateEnvironment(t, "", "staging")
	s.AddMember(t, prod, "ci@example.test", store.RoleAdmin)
	ci := s.SignInAs(t, "ci@example.test", "CI")
	_, token := s.CreateToken(t, ci, "ci-walk", "", "hello-world/production:admin")
	dns.Set("shop.example.test", "127.0.0.1")

	resp, body := apiCall(t, s, nil, "", "GET", "/api/v1/openapi.json", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("openapi.json = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(body))
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("the document is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: s.URL + "/api/v1"}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}

	called := map[string]bool{}
	const secretValue = "value-never-returned-7f3a"
	// call makes one request, checks request and answer against the
	// document and returns the answer.
	call := func(tok, method, path, reqBody string, wantStatus int) string {
		t.Helper()
		var rd io.Reader
		if reqBody != "" {
			rd = strings.NewReader(reqBody)
		}
		req, _ := http.NewRequest(method, s.URL+"/api/v1"+path, rd)
		if reqBody != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s is not in the document: %v", method, path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if wantStatus < 400 {
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Fatalf("request %s %s does not match the document: %v", method, path, err)
			}
			if reqBody != "" {
				req.Body = io.NopCloser(strings.NewReader(reqBody))
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %s = %d, want %d:\n%s", method, path, resp.StatusCode, wantStatus, b)
		}
		if bytes.Contains(b, []byte(secretValue)) || bytes.Contains(b, []byte(token)) {
			t.Fatalf("%s %s answers with a value or the token", method, path)
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
		out.SetBodyBytes(b)
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("answer of %s %s (%d) does not match the document: %v\n%s", method, path, resp.StatusCode, err, b)
		}
		called[route.Method+" "+route.Path] = true
		return string(b)
	}
	quote := func(s string) string { b, _ := jsonMarshal(s); return string(b) }
	env := "/projects/hello-world/environments/production"

	call(token, "GET", "/environments", "", 200)
	call(token, "POST", "/validate", `{"manifest": `+quote(webtest.MinimalManifest)+`}`, 200)
	call(token, "POST", "/validate", `{"manifest": "name: hello-world\nunknown: 1\n"}`, 422)
	call(token, "POST", "/validate", `{"manifest": 3}`, 400)
	call(token, "POST", "/projects/hello-world/revisions", `{"manifest": `+quote(webtest.MinimalManifest)+`}`, 200)
	if got := call(token, "POST", "/projects/hello-world/revisions", `{"manifest": "name: hello-world\napplications: 1\n"}`, 422); !strings.Contains(got, `"diagnostics"`) {
		t.Errorf("a manifest that does not compile answers without diagnostics: %s", got)
	}
	call(token, "GET", env+"/plan", "", 200)
	// Never deployed: nothing is claimed.
	if got := call(token, "GET", env+"/health", "", 200); !strings.Contains(got, `"level":"unknown"`) || !strings.Contains(got, `"reported":false`) {
		t.Errorf("health of an environment never deployed = %s, want unknown and not reported", got)
	}
	call(token, "GET", env+"/plan?revision=99", "", 404)
	// Refused: the required value is missing; the sentence is the page's.
	if got := call(token, "POST", env+"/deploys", `{}`, 422); !strings.Contains(got, "Required values are missing") {
		t.Errorf("deploy without values: %s", got)
	}
	call(token, "PUT", env+"/values/APP_DOMAIN", `{"value": "shop.example.test"}`, 200)
	call(token, "PUT", env+"/values/NOT_USED", `{"value": "`+secretValue+`"}`, 422)
	call(token, "PUT", env+"/values/bad-name", `{"value": "x"}`, 422)
	// The page's check, suggestion included (one function for both).
	if got := call(token, "PUT", env+"/values/app_domain", `{"value": "x"}`, 422); !strings.Contains(got, "Did you mean APP_DOMAIN?") || !strings.Contains(got, `"field":"name"`) {
		t.Errorf("a value name in the wrong case: %s; want the page's suggestion on the name field", got)
	}
	call(token, "POST", env+"/values/import", `{"dotenv": "APP_DOMAIN=shop.example.test\nOTHER=`+secretValue+`\n"}`, 200)
	call(token, "POST", env+"/values/import", `{"dotenv": "   "}`, 422)
	call(token, "POST", env+"/backups", "", 422)
	run := call(token, "POST", env+"/deploys", `{"revision": 1}`, 201)
	runPath := env + "/runs/" + jsonField(t, run, "id")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(call(token, "GET", runPath, "", 200), `"finished":true`) {
		if time.Now().After(deadline) {
			t.Fatal("the deploy did not finish")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := call(token, "GET", runPath, "", 200); !strings.Contains(got, `"status":"succeeded"`) || !strings.Contains(got, `"checkpoints":[{`) {
		t.Fatalf("the finished run: %s", got)
	}
	call(token, "POST", runPath+"/cancel", "", 409)
	// Deployed, with web scaled outside the Studio: the health lists the
	// drift (as the platform's watch stores it).
	if _, err := s.DB.SyncHealth(context.Background(), prod.ID, platform.EnvironmentHealth{Reported: true,
		Apps: []platform.AppHealth{{Name: "web", State: platform.StateScaledToZero}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.SyncDrift(context.Background(), prod.ID, []platform.Drift{{App: "web", Kind: platform.DriftReplicas, Object: "Deployment web", Field: "replicas", Now: "0", Applied: "1"}}); err != nil {
		t.Fatal(err)
	}
	if got := call(token, "GET", env+"/health", "", 200); !strings.Contains(got, `"drift":[{"app":"web","kind":"replicas","object":"Deployment web","field":"replicas","now":"0","applied":"1"`) {
		t.Errorf("health with web scaled outside the Studio = %s, want its drift", got)
	}
	// Protection (issue 40): the rule, then a deploy that waits for the
	// approval of its plan, approved through the API.
	call(token, "GET", env+"/protection", "", 200)
	call(token, "PUT", env+"/protection", `{"approvals": 9, "approvers": ["admin"]}`, 422)
	// Freeze windows: a bad cron changes nothing; a window far ahead is kept.
	call(token, "PUT", env+"/protection", `{"freeze_windows": [{"cron": "0 25 * * *", "duration": "2h", "action": "refuse"}]}`, 422)
	if got := call(token, "PUT", env+"/protection", `{"freeze_windows": [{"from": "2099-12-24T18:00", "to": "2099-12-27T06:00", "action": "wait"}]}`, 200); !strings.Contains(got, `"freeze_windows":[{"from":"2099-12-24T18:00","to":"2099-12-27T06:00","action":"wait"}]`) {
		t.Fatalf("freeze windows: %s", got)
	}
	call(token, "POST", runPath+"/approve", "", 409)
	call(token, "POST", runPath+"/reject", `{"comment": "no"}`, 409)
	call(token, "PUT", env+"/protection", `{"approvals": 1, "approvers": ["admin"], "self_approval": true}`, 200)
	waiting := call(token, "POST", env+"/deploys", `{"redeploy": true}`, 201)
	if !strings.Contains(waiting, `"status":"waiting"`) || !strings.Contains(waiting, `"needed":1`) {
		t.Fatalf("a deploy of a protected environment: %s", waiting)
	}
	waitingPath := env + "/runs/" + jsonField(t, waiting, "id")
	call(token, "POST", waitingPath+"/approve", `{"digest": "not-the-plan"}`, 409)
	call(token, "POST", waitingPath+"/approve", `{"comment": "ok"}`, 200)
	for !strings.Contains(call(token, "GET", waitingPath, "", 200), `"finished":true`) {
		if time.Now().After(deadline.Add(60 * time.Second)) {
			t.Fatal("the approved deploy did not finish")
		}
		time.Sleep(100 * time.Millisecond)
	}
	call(token, "GET", env+"/runs/999999", "", 404)
	call(token, "POST", "/projects/hello-world/environments/staging/deploys", `{}`, 403)
	call("", "GET", "/environments", "", 401)
	call(token, "PUT", env+"/values/APP_DOMAIN", `{"value": 1}`, 400)
	call(token, "POST", env+"/deploys", `{"revision": 1, "unknown": true}`, 400)
	if _, body := apiCall(t, s, nil, token, "GET", "/api/v1/nothing-here", nil); !strings.Contains(body, `"status":404`) {
		t.Errorf("an unknown API address: %s", body)
	}

	// Every operation of the document was called.
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !called[method+" "+path] {
				missing = append(missing, method+" "+path)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations never called: %v", missing)
	}

	// Every change through the token is audited with its name.
	var actors []string
	rows, _ := s.DB.Pool.Query(t.Context(), `SELECT DISTINCT actor || ' ' || action FROM audit_events WHERE action NOT LIKE 'token.%' AND action NOT LIKE 'sign-in%' AND actor LIKE 'CI%' ORDER BY 1`)
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		actors = append(actors, a)
	}
	rows.Close()
	if len(actors) == 0 || !slices.ContainsFunc(actors, func(a string) bool { return strings.HasPrefix(a, "CI · token ci-walk deploy") }) {
		t.Errorf("audit records by the token: %q, want each naming the token ci-walk", actors)
	}
	for _, a := range actors {
		if !strings.HasPrefix(a, "CI · token ci-walk ") {
			t.Errorf("audit record %q does not name the token", a)
		}
	}
}

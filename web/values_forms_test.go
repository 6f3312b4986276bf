package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestValueFormsKeepWhatIsNotSecret: a failed set keeps the name, a failed
// import keeps a text without values and clears one with values, setting a
// name the manifest does not use asks first, and "Replace" puts the cursor
// in the value field.
func TestValueFormsKeepWhatIsNotSecret(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	c := s.SignInLocal(t)

	resp, body := s.PostForm(t, c, envPath+"/values", url.Values{"name": {"app_domain"}, "value": {"v"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `value="app_domain"`) ||
		!strings.Contains(body, `aria-describedby="value-name-error"`) || !strings.Contains(body, `id="value-name-error" role="alert"`) {
		t.Errorf("invalid name = %d: want 422 with the name kept and its error tied to the field", resp.StatusCode)
	}
	if !strings.Contains(body, `name="name" value="app_domain"`) && !strings.Contains(body, "autofocus") {
		t.Errorf("invalid name: the field with the error does not take the focus")
	}

	resp, body = s.PostForm(t, c, envPath+"/values/import", url.Values{"dotenv": {"# only names\nAPP_DOMAIN=\n\"broken\n"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "# only names") {
		t.Errorf("failed import without values = %d: want 422 with the text kept", resp.StatusCode)
	}
	const secret = "hunter2-kept-out"
	resp, body = s.PostForm(t, c, envPath+"/values/import", url.Values{"dotenv": {"APP_DOMAIN=" + secret + "\nAPP_DOMAIN=again\n"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || strings.Contains(body, secret) || !strings.Contains(body, "cleared because it holds values") {
		t.Errorf("failed import with values = %d: want 422, the text cleared and a sentence saying why (and never the value)", resp.StatusCode)
	}

	resp, body = s.PostForm(t, c, envPath+"/values", url.Values{"name": {"NOT_USED"}, "value": {secret}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="confirm_orphan" value="1"`) || strings.Contains(body, secret) {
		t.Fatalf("set a name the manifest does not use = %d: want the confirmation, without the value", resp.StatusCode)
	}
	var n int
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM environment_values WHERE name = 'NOT_USED'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the unconfirmed orphan was stored (%d rows, %v)", n, err)
	}
	if resp, _ := s.PostForm(t, c, envPath+"/values", url.Values{"name": {"NOT_USED"}, "value": {secret}, "confirm_orphan": {"1"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("confirmed orphan = %d, want 303", resp.StatusCode)
	}

	_, page := s.Get(t, c, envPath+"/values")
	if !strings.Contains(page, `href="`+envPath+`/values?name=SESSION_SECRET#value-value"`) {
		t.Errorf("values page: no Set link to the value field of SESSION_SECRET")
	}
	_, page = s.Get(t, c, envPath+"/values?name=SESSION_SECRET")
	if !strings.Contains(page, `value="SESSION_SECRET"`) || !strings.Contains(page, `id="value-value" name="value" autocomplete="new-password" spellcheck="false" aria-invalid="false" aria-describedby="value-value-hint" autofocus`) {
		t.Errorf("?name=SESSION_SECRET: want the name filled in and the cursor in the value field")
	}
}

// TestValuesPageShowsUsesAndFilters: each name says where the manifest
// uses it; the filter works as a GET form; a never-deployed environment
// wears no green active badge.
func TestValuesPageShowsUsesAndFilters(t *testing.T) {
	t.Parallel()
	s, _ := wikiServer(t)
	c := s.SignInLocal(t)
	_, page := s.Get(t, c, envPath+"/values")
	for _, want := range []string{`<code class="value-use">web.routes.public.domain</code>`, `<code class="value-use">web.environment.SESSION_SECRET</code>`, `name="filter"`} {
		if !strings.Contains(page, want) {
			t.Errorf("values page lacks %q", want)
		}
	}
	_, page = s.Get(t, c, envPath+"/values?filter=routes")
	if !strings.Contains(page, `data-name="APP_DOMAIN"`) || strings.Contains(page, `data-name="SESSION_SECRET"`) || !strings.Contains(page, "1 of 2") {
		t.Errorf("?filter=routes: want only APP_DOMAIN, 1 of 2")
	}
	for _, path := range []string{envPath, "/projects/team-wiki"} {
		_, page = s.Get(t, c, path)
		if strings.Contains(page, `badge-ok">active`) || !strings.Contains(page, "not deployed yet") {
			t.Errorf("%s: a never-deployed environment is shown as active", path)
		}
	}
}

package handlers

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/skali-dev/studio/apperr"
	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/paths"
	"github.com/skali-dev/studio/runs"
	"github.com/skali-dev/studio/store"
	"github.com/skali-dev/studio/views"
)

// newWebhookCookie carries a just-added endpoint's id and signing secret
// from the post to the page it redirects to, for one minute and for that
// page only, as the tokens page does with a new token.
const newWebhookCookie = "studio_new_webhook"

// maxWebhookEndpoints bounds the endpoints of one environment (or of every
// environment).
const maxWebhookEndpoints = 20

// webhookDeliveriesShown is how many recent deliveries a page lists.
const webhookDeliveriesShown = 50

// webhookTextShown bounds the stored texts a page shows (a delivery's
// error, an endpoint's reason for being turned off), whatever a row holds.
const webhookTextShown = 2 * store.WebhookErrorLimit

// Webhooks is the webhooks pages: an environment's (its admins) and the
// one of endpoints that hear of every environment (installation admins).
type Webhooks struct {
	*Base
	Vault *store.Vault
	// Runs, when set, refuses at once an endpoint whose address
	// deliveries would refuse (runs.Service.WebhookURLRefusal).
	Runs *runs.Service
	// Secure marks the new-endpoint cookie Secure (https).
	Secure bool
}

// NewWebhooks returns the webhooks handlers.
func NewWebhooks(b *Base, vault *store.Vault, secure bool) *Webhooks {
	return &Webhooks{Base: b, Vault: vault, Secure: secure}
}

// webhookScope is the page a request is about: an environment, or every
// environment (env nil).
type webhookScope struct {
	env  *store.Environment
	base string
}

// scope authorizes the request: environment admins on an environment's
// page, installation admins on the installation's.
func (h *Webhooks) scope(r *http.Request) (webhookScope, error) {
	if chi.URLParam(r, "env") == "" {
		if err := RequireAdmin(r); err != nil {
			return webhookScope{}, err
		}
		return webhookScope{base: paths.AdminWebhooks}, nil
	}
	env, _, err := h.Environment(r, store.RoleAdmin)
	if err != nil {
		return webhookScope{}, err
	}
	return webhookScope{env: env, base: paths.Webhooks(env.Project, env.Name)}, nil
}

func (s webhookScope) envID() int64 {
	if s.env == nil {
		return 0
	}
	return s.env.ID
}

// endpoints are the scope's own endpoints (an environment's page leaves
// out those of every environment: their deliveries concern others too).
func (h *Webhooks) endpoints(r *http.Request, s webhookScope) ([]store.WebhookEndpoint, error) {
	all, err := h.DB.WebhookEndpoints(r.Context(), s.envID())
	if err != nil {
		return nil, err
	}
	var out []store.WebhookEndpoint
	for _, e := range all {
		if (e.EnvironmentID == nil) == (s.env == nil) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (h *Webhooks) page(r *http.Request, s webhookScope, form views.WebhookForm, checked []string) (views.WebhooksPage, error) {
	m := views.WebhooksPage{Base: s.base, Form: form}
	if s.env != nil {
		m.Project, m.Environment = s.env.Project, s.env.Name
		m.Chrome = h.Chrome(r, "Webhooks · "+s.env.Project+"/"+s.env.Name, "projects")
	} else {
		m.Chrome = h.Chrome(r, "Webhooks for every environment", "admin")
	}
	for _, g := range WebhookEventGroups {
		m.EventGroups = append(m.EventGroups, views.WebhookEventGroupChoice{Name: g.Name, Label: g.Label})
	}
	for _, t := range store.WebhookEventTypes {
		m.EventTypes = append(m.EventTypes, views.WebhookEventChoice{Name: t.Name, Label: t.Label, Checked: slices.Contains(checked, t.Name)})
	}
	eps, err := h.endpoints(r, s)
	if err != nil {
		return m, err
	}
	urls := map[int64]string{}
	formats := map[int64]string{}
	var ids []int64
	for _, e := range eps {
		row := views.WebhookEndpointRow{ID: e.ID, URL: e.URL, Events: e.Events, Format: e.Format, State: "active",
			DisabledReason: humanize.Clip(e.DisabledReason, webhookTextShown), Created: views.Ago(e.CreatedAt), CreatedBy: e.CreatedBy}
		if e.DisabledAt != nil {
			row.State = "turned off"
			if !strings.HasPrefix(e.DisabledReason, "Turned off by") {
				row.State = "failing"
				m.Alarms = append(m.Alarms, row)
			}
		}
		m.Endpoints = append(m.Endpoints, row)
		urls[e.ID] = e.URL
		formats[e.ID] = e.Format
		ids = append(ids, e.ID)
	}
	ds, err := h.DB.WebhookDeliveries(r.Context(), ids, webhookDeliveriesShown)
	if err != nil {
		return m, err
	}
	for _, d := range ds {
		row := views.WebhookDeliveryRow{ID: d.ID, Event: d.Event, URL: urls[d.EndpointID], Where: d.Data.Project + "/" + d.Data.Environment,
			Status: d.Status, Attempts: d.Attempts, Duration: "—", Code: "—", Error: humanize.Clip(d.LastError, webhookTextShown), When: views.Ago(d.CreatedAt),
			Redelivery: d.RedeliveryOf != nil}
		if d.Status == store.WebhookSucceeded {
			row.Error = ""
		}
		if d.Duration != nil {
			row.Duration = humanize.Duration(d.Duration.Round(time.Millisecond))
			if *d.Duration < time.Second {
				row.Duration = strconv.FormatInt(d.Duration.Milliseconds(), 10) + " ms"
			}
		}
		if d.ResponseCode != nil {
			row.Code = strconv.Itoa(*d.ResponseCode)
		}
		// The body as sent: names, states and links, never a value.
		if h.Runs != nil {
			if body, err := h.Runs.DeliveryBody(formats[d.EndpointID], &d); err == nil {
				var pretty bytes.Buffer
				if json.Indent(&pretty, body, "", "  ") == nil {
					row.Body = pretty.String()
				}
			}
		}
		if d.InFlightSince != nil {
			// The attempt under way counts: "sending, 1 attempt", never
			// "pending, 0 attempts" while the endpoint holds it.
			row.Attempts = d.Attempts + 1
			row.InFlight = fmt.Sprintf("Attempt %d in flight since %s", row.Attempts, humanize.HourSecond(*d.InFlightSince))
		}
		m.Deliveries = append(m.Deliveries, row)
	}
	return m, nil
}

// ShowWebhooksPage lists the endpoints, the recent deliveries and the form;
// ?created=ID shows that new endpoint's secret, once, from the cookie the
// post set.
func (h *Webhooks) ShowWebhooksPage(w http.ResponseWriter, r *http.Request) error {
	s, err := h.scope(r)
	if err != nil {
		return err
	}
	m, err := h.page(r, s, views.WebhookForm{}, nil)
	if err != nil {
		return err
	}
	if created := r.URL.Query().Get("created"); created != "" {
		if c, err := r.Cookie(newWebhookCookie); err == nil {
			idText, secret, _ := strings.Cut(c.Value, ".")
			id, _ := strconv.ParseInt(idText, 10, 64)
			if idText == created && h.Vault != nil {
				for _, e := range m.Endpoints {
					stored, err := h.Vault.WebhookSecret(r.Context(), e.ID)
					if e.ID == id && err == nil && subtle.ConstantTimeCompare([]byte(stored), []byte(secret)) == 1 {
						m.Created = &views.CreatedWebhook{ID: id, URL: e.URL, Secret: secret}
					}
				}
			}
			http.SetCookie(w, &http.Cookie{Name: newWebhookCookie, Value: "", Path: s.base, MaxAge: -1,
				HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
		}
	}
	return Render(w, r, http.StatusOK, views.Webhooks(m))
}

// webhookURLProblem says what is wrong with an endpoint's URL, or "".
func webhookURLProblem(raw string) string {
	if raw == "" {
		return "Enter the URL the Studio should send events to."
	}
	if len(raw) > 2000 {
		return "This URL has " + humanize.TooLong(len(raw), 2000) + "."
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" {
		return "Enter a full http or https URL, such as https://hooks.example.com/studio."
	}
	if u.Fragment != "" {
		return "Leave out the #fragment: it is never sent to the server."
	}
	return ""
}

// AddWebhookEndpoint adds an endpoint: fields url, events (repeated) and
// format (standard or slack). It answers 303 to the page with ?created=ID,
// which shows the endpoint's signing secret once.
func (h *Webhooks) AddWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	s, err := h.scope(r)
	if err != nil {
		return err
	}
	if err := ParseForm(r); err != nil {
		return err
	}
	form := views.WebhookForm{URL: strings.TrimSpace(r.PostForm.Get("url")), Format: r.PostForm.Get("format")}
	if form.Format == "" {
		form.Format = store.WebhookFormatStandard
	}
	var events []string
	for _, ev := range expandEventGroups(r.PostForm["events"]) {
		if slices.Contains(events, ev) {
			continue
		}
		if !slices.ContainsFunc(store.WebhookEventTypes, func(t store.WebhookEventType) bool { return t.Name == ev }) {
			form.EventsError = fmt.Sprintf("%q is not an event the Studio sends.", ev)
			break
		}
		events = append(events, ev)
	}
	if form.EventsError == "" && len(events) == 0 {
		form.EventsError = "Choose at least one event."
	}
	if form.Format != store.WebhookFormatStandard && form.Format != store.WebhookFormatSlack {
		form.FormatError = "Choose the standard or the Slack-compatible body."
	}
	form.URLError = webhookURLProblem(form.URL)
	if form.URLError == "" && h.Runs != nil {
		if refusal := h.Runs.WebhookURLRefusal(form.URL); refusal != nil {
			form.URLError = "Deliveries to this URL would be " + refusal.Error() + "."
		}
	}
	if form.URLError == "" {
		eps, err := h.endpoints(r, s)
		if err != nil {
			return err
		}
		if len(eps) >= maxWebhookEndpoints {
			form.URLError = fmt.Sprintf("There are already %d endpoints here, the most there may be. Delete one first.", maxWebhookEndpoints)
		}
	}
	if form.URLError != "" || form.EventsError != "" || form.FormatError != "" {
		m, err := h.page(r, s, form, events)
		if err != nil {
			return err
		}
		return Render(w, r, http.StatusUnprocessableEntity, views.Webhooks(m))
	}
	if h.Vault == nil {
		return apperr.Errorf(apperr.Internal, "webhooks: no vault")
	}
	ep, secret, err := h.Vault.CreateWebhookEndpoint(r.Context(), ActorOf(r), s.env,
		store.NewWebhookEndpoint{URL: form.URL, Events: events, Format: form.Format})
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: newWebhookCookie, Value: strconv.FormatInt(ep.ID, 10) + "." + secret, Path: s.base,
		MaxAge: int(time.Minute.Seconds()), HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteStrictMode})
	return SeeOther(w, r, paths.WebhookCreated(s.base, ep.ID))
}

// endpoint loads the {id} endpoint of the page's scope: another scope's
// is "not found", so ids tell nothing.
func (h *Webhooks) endpoint(r *http.Request, s webhookScope) (*store.WebhookEndpoint, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		return nil, apperr.Errorf(apperr.NotFound, "No such webhook endpoint.")
	}
	ep, err := h.DB.WebhookEndpointByID(r.Context(), id)
	if err != nil {
		return nil, err
	}
	mine := ep.EnvironmentID == nil && s.env == nil || ep.EnvironmentID != nil && s.env != nil && *ep.EnvironmentID == s.env.ID
	if !mine {
		return nil, apperr.Errorf(apperr.NotFound, "No such webhook endpoint.")
	}
	return ep, nil
}

// DeleteWebhookEndpoint removes an endpoint, its secret and its deliveries.
func (h *Webhooks) DeleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	return h.endpointAction(w, r, func(s webhookScope, ep *store.WebhookEndpoint) (string, error) {
		return "Deleted the endpoint " + ep.URL + ".", h.DB.DeleteWebhookEndpoint(r.Context(), ActorOf(r), ep)
	})
}

// DisableWebhookEndpoint turns an endpoint off: it is sent nothing until
// turned on again.
func (h *Webhooks) DisableWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	return h.endpointAction(w, r, func(s webhookScope, ep *store.WebhookEndpoint) (string, error) {
		return "Turned off " + ep.URL + ": it is sent nothing until you turn it on.", h.DB.SetWebhookEndpointEnabled(r.Context(), ActorOf(r), ep, false)
	})
}

// SendTestEvent sends the endpoint a test event (webhook.test), signed and
// delivered as every event is, so an admin sees at once that it arrives.
func (h *Webhooks) SendTestEvent(w http.ResponseWriter, r *http.Request) error {
	return h.endpointAction(w, r, func(s webhookScope, ep *store.WebhookEndpoint) (string, error) {
		data := store.WebhookData{Path: s.base}
		if s.env != nil {
			data.Project, data.Environment = s.env.Project, s.env.Name
		}
		if _, err := h.DB.SendTestEvent(r.Context(), ActorOf(r), ep, data); err != nil {
			return "", err
		}
		return "Sending a test event to " + ep.URL + ": its delivery is listed below.", nil
	})
}

// EnableWebhookEndpoint turns an endpoint on again (after it kept failing,
// say): it hears of events from now on.
func (h *Webhooks) EnableWebhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	return h.endpointAction(w, r, func(s webhookScope, ep *store.WebhookEndpoint) (string, error) {
		return "Turned on " + ep.URL + ": it hears of events from now on.", h.DB.SetWebhookEndpointEnabled(r.Context(), ActorOf(r), ep, true)
	})
}

func (h *Webhooks) endpointAction(w http.ResponseWriter, r *http.Request, act func(webhookScope, *store.WebhookEndpoint) (string, error)) error {
	s, err := h.scope(r)
	if err != nil {
		return err
	}
	ep, err := h.endpoint(r, s)
	if err != nil {
		return err
	}
	msg, err := act(s, ep)
	if err != nil {
		return err
	}
	h.Flash(r.Context(), "success", msg)
	return SeeOther(w, r, s.base)
}

// Redeliver sends a delivery again, as a new delivery with the same
// webhook-id and body.
func (h *Webhooks) Redeliver(w http.ResponseWriter, r *http.Request) error {
	s, err := h.scope(r)
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "delivery"), 10, 64)
	if err != nil || id < 1 {
		return apperr.Errorf(apperr.NotFound, "No such webhook delivery.")
	}
	d, err := h.DB.WebhookDeliveryByID(r.Context(), id)
	if err != nil {
		return err
	}
	ep, err := h.DB.WebhookEndpointByID(r.Context(), d.EndpointID)
	if err != nil {
		return err
	}
	mine := ep.EnvironmentID == nil && s.env == nil || ep.EnvironmentID != nil && s.env != nil && *ep.EnvironmentID == s.env.ID
	if !mine {
		return apperr.Errorf(apperr.NotFound, "No such webhook delivery.")
	}
	if ep.DisabledAt != nil {
		return apperr.Errorf(apperr.Conflict, "%s is turned off. Turn it on before sending it anything again.", ep.URL)
	}
	if _, err := h.DB.Redeliver(r.Context(), ActorOf(r), ep, d); err != nil {
		return err
	}
	h.Flash(r.Context(), "success", fmt.Sprintf("Sending %s to %s again.", strings.ToLower(store.WebhookEventLabel(d.Event)), ep.URL))
	return SeeOther(w, r, s.base)
}

// WebhookEventGroups are the groups of events a form may choose at once
// (events=group:NAME), by the prefixes of their events' names.
var WebhookEventGroups = []struct {
	Name, Label string
	Prefixes    []string
}{
	{"all", "All events", []string{""}},
	{"deploys", "Deploys", []string{"deploy."}},
	{"certificates", "Certificates", []string{"certificate."}},
	{"backups", "Backups and restores", []string{"backup.", "restore."}},
	{"approvals", "Approvals", []string{"approval."}},
}

// expandEventGroups replaces each group:NAME of a form's events by the
// events of that group, in the Studio's order; other values stay.
func expandEventGroups(values []string) []string {
	var out []string
	for _, v := range values {
		name, ok := strings.CutPrefix(v, "group:")
		if !ok {
			out = append(out, v)
			continue
		}
		known := false
		for _, g := range WebhookEventGroups {
			if g.Name != name {
				continue
			}
			known = true
			for _, t := range store.WebhookEventTypes {
				for _, p := range g.Prefixes {
					if strings.HasPrefix(t.Name, p) {
						out = append(out, t.Name)
						break
					}
				}
			}
		}
		if !known {
			out = append(out, v)
		}
	}
	return out
}

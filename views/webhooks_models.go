package views

// WebhooksPage is the model of a webhooks page: an environment's endpoints
// (Project and Environment set) or those of every environment (the
// installation's, both empty).
type WebhooksPage struct {
	Chrome               Chrome
	Project, Environment string
	// Base is the page's own path; its forms post under it.
	Base      string
	Endpoints []WebhookEndpointRow
	// Alarms are the endpoints turned off because they kept failing.
	Alarms []WebhookEndpointRow
	// Created is the endpoint just added, with its secret, shown once.
	Created    *CreatedWebhook
	Deliveries []WebhookDeliveryRow
	Form       WebhookForm
	// EventTypes are the events an endpoint may choose, in order.
	EventTypes []WebhookEventChoice
	// EventGroups choose several events at once (all, deploys, ...).
	EventGroups []WebhookEventGroupChoice
}

// Installation reports whether the page is the installation-wide one.
func (m WebhooksPage) Installation() bool { return m.Environment == "" }

// WebhookEndpointRow is one endpoint in the list.
type WebhookEndpointRow struct {
	ID     int64
	URL    string
	Events []string
	Format string
	// State is active, turned off or failing (turned off after failing).
	State          string
	DisabledReason string
	Created        string
	CreatedBy      string
}

// CreatedWebhook is a new endpoint's URL and signing secret, shown once.
type CreatedWebhook struct {
	ID     int64
	URL    string
	Secret string
}

// WebhookDeliveryRow is one recent delivery.
type WebhookDeliveryRow struct {
	// Body is the body as sent (indented JSON), "" when unknown.
	Body       string
	ID         int64
	Event      string
	URL        string
	Where      string
	Status     string
	Attempts   int
	Duration   string
	Code       string
	Error      string
	When       string
	Redelivery bool
	// InFlight says the attempt a process is sending now ("attempt 2 in
	// flight since 12:04:10 UTC"); empty when none is.
	InFlight string
}

// WebhookEventChoice is an event type of the form, checked or not.
type WebhookEventChoice struct {
	Name, Label string
	Checked     bool
}

// WebhookForm is the add-an-endpoint form with its errors.
type WebhookForm struct {
	URL, Format                        string
	URLError, EventsError, FormatError string
}

// WebhookEventGroupChoice is a group of events the form may choose at once
// (posted as events=group:NAME).
type WebhookEventGroupChoice struct {
	Name, Label string
}

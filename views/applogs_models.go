package views

import (
	"time"

	"github.com/skali-dev/studio/humanize"
	"github.com/skali-dev/studio/runs/platform"
)

// AppLogsPage is an application's runtime logs page (issue 39).
type AppLogsPage struct {
	Chrome            Chrome
	Project, Env, App string
	// Since, Until and Query are the form's fields as given; Previous
	// shows the previous containers' logs.
	Since, Until, Query string
	Previous            bool
	// Error says why the request was refused (the form shows it).
	Error      string
	Containers []LogContainerView
	// Lines are masked and made visible by the service.
	Lines []RuntimeLineView
	// Cut: older lines that match were left out; LinesLimit is the bound.
	Cut        bool
	LinesLimit int
	// After is the newest line's time (RFC 3339): the follow resumes
	// after it.
	After string
	// FollowURL is the websocket that follows new lines ("" when the
	// request cannot grow: a previous log, a window that ends).
	FollowURL   string
	DownloadURL string
}

// LogContainerView is one container whose log the page reads.
type LogContainerView struct {
	Pod, Container string
	Restarts       int
	Running        bool
}

// RuntimeLineView is one line of a runtime log.
type RuntimeLineView struct {
	// At is the line's time of day (UTC, milliseconds); Datetime RFC 3339.
	At        string `json:"at"`
	Datetime  string `json:"datetime"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Text      string `json:"text"`
}

// NewRuntimeLine is l as the page shows it.
func NewRuntimeLine(l platform.LogLine) RuntimeLineView {
	return RuntimeLineView{At: humanize.TimeOfDay(l.At, true), Datetime: l.At.UTC().Format(time.RFC3339Nano), Pod: l.Pod, Container: l.Container, Text: l.Text}
}

// Source is the line's pod, and its container when the pod has several.
func (l RuntimeLineView) Source() string {
	if l.Container == "" {
		return l.Pod
	}
	return l.Pod + "/" + l.Container
}

package handlers

import (
	"net/http"

	"github.com/skali-dev/studio/views"
)

// Home shows the projects the signed-in user can see.
type Home struct {
	*Base
}

// NewHome returns the home page handler.
func NewHome(b *Base) *Home { return &Home{Base: b} }

// ShowHomePage renders the home page.
func (h *Home) ShowHomePage(w http.ResponseWriter, r *http.Request) error {
	u := CurrentUser(r.Context())
	m := views.HomePage{
		Chrome:    h.Chrome(r, "Projects", "projects"),
		CanCreate: u != nil && u.IsAdmin,
	}
	return Render(w, r, http.StatusOK, views.Home(m))
}

package views

// MemberRemovePage confirms taking a member's role away.
type MemberRemovePage struct {
	Chrome      Chrome
	Project     string
	Environment string
	UserID      int64
	// Who is the member's name or email; Role their role now.
	Who  string
	Role string
	You  bool
}

// MembersPage is the model of an environment's members page.
type MembersPage struct {
	Chrome      Chrome
	Project     string
	Environment string
	Members     []MemberRow
	Form        MemberForm
	// NoOIDC is true when no OpenID provider is configured: people added
	// by email cannot sign in yet.
	NoOIDC bool
}

// MemberRow is one member in the list.
type MemberRow struct {
	UserID  int64
	Name    string
	Email   string
	Role    string
	Pending bool
	// LastSignIn is a readable time, or "" when never.
	LastSignIn string
	// You marks the signed-in user's own row.
	You bool
}

// MemberForm is the add-a-member form with its errors.
type MemberForm struct {
	Email      string
	Role       string
	EmailError string
	RoleError  string
}

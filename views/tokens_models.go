package views

// TokensPage is the model of the API tokens page.
type TokensPage struct {
	Chrome Chrome
	// Tokens are the person's own tokens, or every token for an
	// installation admin (ShowOwner).
	Tokens    []TokenRow
	ShowOwner bool
	// Created is the token just created, with its secret, shown once.
	Created *CreatedToken
	// Choices are the environments the person may give a token, each with
	// the roles up to their own there.
	Choices []TokenChoice
	Form    TokenForm
	// EnvSearch is the environment search's text; Searchable shows the
	// search (more environments than are listed); MoreChoices counts the
	// matching environments not listed.
	EnvSearch   string
	Searchable  bool
	MoreChoices int
}

// TokenRow is one token in the list.
type TokenRow struct {
	ID    int64
	Name  string
	Owner string
	Scope []string
	// Created, LastUsed and Expires are readable times ("" for never used).
	Created, LastUsed, Expires string
	// State is active, expired or revoked.
	State     string
	CanRevoke bool
}

// CreatedToken is a new token's name and its secret, shown once.
type CreatedToken struct {
	ID     int64
	Name   string
	Secret string
	// Scope says where it acts: "shop/staging (deployer)".
	Scope []string
	// Command is a ready line that uses it ("export STUDIO_URL=… && studio
	// deploy …"), with the secret: shown with it, once.
	Command string
}

// TokenChoice is one environment the new token may act on.
type TokenChoice struct {
	Project, Env string
	// Roles are the roles up to the person's own, least first.
	Roles []string
	// Picked is the role chosen in a failed post, "" for none.
	Picked string
}

// Value is the scope field's value for role.
func (c TokenChoice) Value(role string) string { return c.Project + "/" + c.Env + ":" + role }

// TokenForm is the create-a-token form with its errors.
type TokenForm struct {
	Name, Days                       string
	NameError, ScopeError, DaysError string
}

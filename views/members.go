package views

import (
	"html"
	"strconv"
	"strings"
)

func memberIDText(n int64) string { return strconv.FormatInt(n, 10) }

func memberCount(n int) string {
	switch n {
	case 0:
		return "No members"
	case 1:
		return "1 member"
	}
	return strconv.Itoa(n) + " members"
}

// emailParts cuts an address where a line may break: after the @ and
// before each dot ("ada.lovelace@", "example", ".com").
func emailParts(addr string) []string {
	var out []string
	start := 0
	for i := 0; i < len(addr); i++ {
		switch {
		case addr[i] == '@':
			out = append(out, addr[start:i+1])
			start = i + 1
		case addr[i] == '.' && i > start:
			out = append(out, addr[start:i])
			start = i
		}
	}
	return append(out, addr[start:])
}

// emailHTML is addr escaped, with <wbr> where emailParts cuts it.
func emailHTML(addr string) string {
	parts := emailParts(addr)
	for i, p := range parts {
		parts[i] = html.EscapeString(p)
	}
	return strings.Join(parts, "<wbr>")
}

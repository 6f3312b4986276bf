package views

import "strconv"

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

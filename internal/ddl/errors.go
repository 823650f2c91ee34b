package ddl

// Error is every error this package returns: what is wrong (Cause) and what
// the user can do about it (Fix).
type Error struct {
	Cause string
	Fix   string
}

// Error is one line: "cause: ...; fix: ...".
func (e *Error) Error() string {
	if e.Fix == "" {
		return "cause: " + e.Cause
	}
	return "cause: " + e.Cause + "; fix: " + e.Fix
}

func newErr(cause, fix string) *Error { return &Error{Cause: cause, Fix: fix} }

// Fixes shared by several refusals.
const (
	fixPlainAlter = "run this change as a plain ALTER TABLE, then use recast for the rest"
	fixBodyOnly   = "pass only what follows ALTER TABLE <name>, e.g. --alter \"ADD COLUMN c INT, DROP COLUMN d\""
)

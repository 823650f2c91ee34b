package flavor

import (
	"context"
	"fmt"
)

// Processlist is the table that lists the server's sessions with (at least)
// the columns ID, USER, HOST, DB, COMMAND, TIME, STATE and INFO.
//
// On MySQL it is performance_schema.processlist: information_schema.PROCESSLIST
// holds INFO as utf8mb3, and MySQL fails the whole query (error 3854, "Cannot
// convert string ... from utf8mb4 to utf8mb3") as soon as any session runs a
// statement with a 4-byte character or binary bytes in it (an application
// writing emoji, recast's own applier writing binary values), even when INFO
// is not selected. performance_schema.processlist carries the text as is.
// On MariaDB it is information_schema.PROCESSLIST (INFO is utf8mb4 there;
// performance_schema.processlist does not exist).
func (s Server) Processlist() string {
	if s.MySQL() {
		return "performance_schema.processlist"
	}
	return "information_schema.PROCESSLIST"
}

// ProcesslistOf detects the server on q and returns its Processlist.
func ProcesslistOf(ctx context.Context, q Queryer) (string, error) {
	s, err := Detect(ctx, q)
	if err != nil {
		return "", fmt.Errorf("flavor: %w", err)
	}
	return s.Processlist(), nil
}

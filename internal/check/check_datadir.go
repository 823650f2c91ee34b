package check

import (
	"context"
	"fmt"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/sqltok"
)

func init() {
	Register(Check{Name: "data-directory", Order: 76, CopyOnly: true, Run: checkDataDirectory})
}

// checkDataDirectory refuses a table (or a partition of it) placed with
// DATA DIRECTORY or INDEX DIRECTORY: CREATE TABLE … LIKE, which builds the
// new table, leaves those options out, so the swapped-in table would move
// into the server's data directory, where the server's own ALTER keeps the
// table where it is (on another disk, say).
func checkDataDirectory(ctx context.Context, in *Input) error {
	var name, create string
	if err := in.DB.QueryRowContext(ctx, dbconn.Tag+"SHOW CREATE TABLE "+in.quotedTable()).Scan(&name, &create); err != nil {
		return fmt.Errorf("read the table's definition: %w", err)
	}
	opt, err := placedIn(create)
	if err != nil || opt == "" {
		return err
	}
	return refusef("change the table with the server's own ALTER TABLE",
		"%s is placed with %s: CREATE TABLE … LIKE, which recast builds the new table with, leaves it out, and the swapped-in table would move into the server's data directory where the server's ALTER keeps it in place", in.quotedTable(), opt)
}

// placedIn returns the first DATA DIRECTORY or INDEX DIRECTORY option of a
// SHOW CREATE TABLE text with its path ("DATA DIRECTORY='/disk2/'"), "" if
// it has none. Identifiers in SHOW CREATE TABLE are quoted, so the two
// words only meet as the option.
func placedIn(create string) (string, error) {
	toks, err := sqltok.Scan(create, sqltok.Options{Exec: sqltok.Enter}) // MySQL prints partitions in /*!50100 … */
	if err != nil {
		return "", fmt.Errorf("read the table's definition: %w", err)
	}
	for i := 0; i+1 < len(toks); i++ {
		if (toks[i].Is("DATA") || toks[i].Is("INDEX")) && toks[i+1].Is("DIRECTORY") {
			opt := toks[i].Text + " DIRECTORY"
			for j := i + 2; j < len(toks) && j <= i+3; j++ {
				if toks[j].Kind == sqltok.String {
					opt += "='" + toks[j].Unquoted() + "'"
					break
				}
			}
			return opt, nil
		}
	}
	return "", nil
}

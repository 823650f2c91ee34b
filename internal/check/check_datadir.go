package check

import (
	"context"
	"database/sql"
	"database/sql/driver"
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
	create, err := showCreateWithDirs(ctx, in.DB, in.quotedTable())
	if err != nil {
		return fmt.Errorf("read the table's definition: %w", err)
	}
	opt, err := placedIn(create)
	if err != nil || opt == "" {
		return err
	}
	return refusef("change the table with the server's own ALTER TABLE",
		"%s is placed with %s: CREATE TABLE … LIKE, which recast builds the new table with, leaves it out, and the swapped-in table would move into the server's data directory where the server's ALTER keeps it in place", in.quotedTable(), opt)
}

// showCreateWithDirs returns SHOW CREATE TABLE's text with the DATA and
// INDEX DIRECTORY options, which it leaves out under sql_mode
// NO_DIR_IN_CREATE (recast's sessions take the server's mode): on a
// connection of its own, without that flag for the statement, the session's
// mode restored after it (or the connection discarded).
func showCreateWithDirs(ctx context.Context, db *sql.DB, quoted string) (create string, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close() //nolint:errcheck // returned to the pool
	var mode string
	if err := conn.QueryRowContext(ctx, dbconn.Tag+"SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return "", err
	}
	if without := dbconn.WithoutMode(mode, "NO_DIR_IN_CREATE"); without != mode {
		if _, err := conn.ExecContext(ctx, dbconn.Tag+"SET SESSION sql_mode = "+dbconn.QuoteString(without)); err != nil {
			return "", err
		}
		defer func() {
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), dbconn.Tag+"SET SESSION sql_mode = "+dbconn.QuoteString(mode)); rerr != nil {
				// Not restored: the connection must not go back to the pool.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
				if err == nil {
					err = rerr
				}
			}
		}()
	}
	var name string
	err = conn.QueryRowContext(ctx, dbconn.Tag+"SHOW CREATE TABLE "+quoted).Scan(&name, &create)
	return create, err
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

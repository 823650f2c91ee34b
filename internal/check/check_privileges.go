package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/recast-osc/recast/internal/dbconn"
	"github.com/recast-osc/recast/internal/flavor"
	"github.com/recast-osc/recast/internal/table"
)

func init() {
	Register(Check{Name: "privileges", Order: 30, Run: checkPrivileges})
}

// checkPrivileges reads SHOW GRANTS (the user's grants and those of its
// enabled role) and refuses, with the GRANT statements to run, when a
// privilege recast needs is missing: dbconn.GlobalPrivileges on *.*,
// dbconn.SchemaPrivileges on the table's database (or on *.*). Table- and
// column-level grants are not counted: recast also works on tables it
// creates next to the table. On MySQL, SELECT on performance_schema too
// (flavor.Server.ReadSchemas).
func checkPrivileges(ctx context.Context, in *Input) error {
	var user string
	if err := in.DB.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&user); err != nil {
		return fmt.Errorf("read CURRENT_USER(): %w", err)
	}
	rows, err := in.DB.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("SHOW GRANTS: %w", err)
	}
	defer rows.Close()
	var gs []grant
	roles := false
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("SHOW GRANTS: %w", err)
		}
		if g, ok := parseGrant(line); ok {
			roles = roles || g.role
			gs = append(gs, g)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("SHOW GRANTS: %w", err)
	}
	missGlobal, missSchema := missingPrivileges(gs, in.Database)
	var missRead []string // schemas recast reads besides the table's (flavor.Server.ReadSchemas)
	srv, err := flavor.Parse(in.Version)
	if err != nil { // a faked server (tests): the flavor is enough here
		srv = flavor.Server{Major: 1, MariaDB: in.Flavor != "mysql"}
	}
	for _, db := range srv.ReadSchemas() {
		if g, s := privileges(gs, db); !g["ALL"] && !g["SELECT"] && !s["ALL"] && !s["SELECT"] {
			missRead = append(missRead, db)
		}
	}
	if len(missGlobal) == 0 && len(missSchema) == 0 && len(missRead) == 0 {
		return nil
	}
	account := accountLiteral(user)
	var lacks, stmts []string
	if len(missGlobal) > 0 {
		lacks = append(lacks, strings.Join(missGlobal, ", ")+" on *.*")
		stmts = append(stmts, fmt.Sprintf("GRANT %s ON *.* TO %s", strings.Join(missGlobal, ", "), account))
	}
	if len(missSchema) > 0 {
		lacks = append(lacks, strings.Join(missSchema, ", ")+" on "+table.QuoteIdent(in.Database)+".*")
		stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s.* TO %s", strings.Join(missSchema, ", "), table.QuoteIdent(in.Database), account))
	}
	for _, db := range missRead {
		lacks = append(lacks, "SELECT on "+table.QuoteIdent(db)+".*")
		stmts = append(stmts, fmt.Sprintf("GRANT SELECT ON %s.* TO %s", table.QuoteIdent(db), account))
	}
	cause := fmt.Sprintf("the user %s lacks privileges recast needs: %s", account, strings.Join(lacks, " and "))
	if roles {
		cause += " (only roles enabled for the session count)"
	}
	return refuse(cause, "run "+strings.Join(stmts, "; "))
}

// missingPrivileges returns what gs lacks of recast's needs, in the order
// of dbconn.GlobalPrivileges and dbconn.SchemaPrivileges.
func missingPrivileges(gs []grant, db string) (global, schema []string) {
	g, s := privileges(gs, db)
	for _, p := range dbconn.GlobalPrivileges {
		if !g["ALL"] && !g[p] {
			global = append(global, p)
		}
	}
	for _, p := range dbconn.SchemaPrivileges {
		if !g["ALL"] && !g[p] && !s["ALL"] && !s[p] {
			schema = append(schema, p)
		}
	}
	return global, schema
}

// accountLiteral turns CURRENT_USER()'s "user@host" into 'user'@'host'.
func accountLiteral(current string) string {
	user, host := current, ""
	if i := strings.LastIndexByte(current, '@'); i >= 0 {
		user, host = current[:i], current[i+1:]
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return q(user) + "@" + q(host)
}

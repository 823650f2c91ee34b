package dbconn

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Semantics are the session settings under which the server's own ALTER
// TABLE would run and convert values: the server's global sql_mode and
// time_zone, or those the user set with --set-vars.
type Semantics struct {
	SQLMode  string // as the server expands it, e.g. "STRICT_TRANS_TABLES,NO_ZERO_DATE"
	TimeZone string // e.g. "SYSTEM", "+05:00", "Europe/Paris"
	// UTC: the zone renders every instant as UTC does (no conversion
	// between TIMESTAMP and local time changes a value).
	UTC bool
	// DST: the zone's offset differs between winter and summer, so some
	// local times are ambiguous (the repeated hour) or missing.
	DST bool
}

// ReadSemantics reads the settings a migration must adopt: a session of db
// (whose DSN carries c's SetVars) reports the user's sql_mode and time_zone
// when --set-vars names them, else the server's globals are taken.
func ReadSemantics(ctx context.Context, db *sql.DB, c Config) (Semantics, error) {
	var s Semantics
	var gMode, gZone, sMode, sZone string
	err := db.QueryRowContext(ctx, Tag+"SELECT @@GLOBAL.sql_mode, @@GLOBAL.time_zone, @@SESSION.sql_mode, @@SESSION.time_zone").
		Scan(&gMode, &gZone, &sMode, &sZone)
	if err != nil {
		return s, fmt.Errorf("read the server's sql_mode and time_zone: %w", err)
	}
	s.SQLMode, s.TimeZone = gMode, gZone
	if _, ok := c.SetVars["sql_mode"]; ok {
		s.SQLMode = sMode
	}
	if _, ok := c.SetVars["time_zone"]; ok {
		s.TimeZone = sZone
	}
	// Every quarter of TIMESTAMP's range (1970 to 2037), now and six
	// months from now: a zone equal to UTC at all of them has no offset
	// worth converting for, and one whose offset differs between them has
	// clock changes. Four instants (2001's winter and summer, now, six
	// months on) called Africa/Casablanca UTC before (+00:00 in 2001,
	// +01:00 since 2018), and would America/Danmarkshavn (-03:00 until
	// 1996), Africa/Sao_Tome (+01:00 in 2018) or Africa/Monrovia: their
	// TIMESTAMPs from then went unconverted.
	var utc, dst sql.NullBool
	err = db.QueryRowContext(ctx, Tag+`WITH RECURSIVE q(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM q WHERE n < 271),
instants AS (SELECT TIMESTAMP'1970-01-15 12:00:00' + INTERVAL 3 * n MONTH AS at FROM q
	UNION ALL SELECT CAST(UTC_TIMESTAMP() AS DATETIME) UNION ALL SELECT CAST(UTC_TIMESTAMP() + INTERVAL 6 MONTH AS DATETIME)),
offsets AS (SELECT TIMESTAMPDIFF(SECOND, at, CONVERT_TZ(at, ?, '+00:00')) AS o FROM instants)
SELECT MAX(o) = 0 AND MIN(o) = 0, MAX(o) <> MIN(o) FROM offsets`, s.TimeZone).Scan(&utc, &dst)
	if err != nil {
		return s, fmt.Errorf("read the server's time_zone: %w", err)
	}
	s.UTC = utc.Valid && utc.Bool
	s.DST = dst.Valid && dst.Bool
	if s.SQLMode == "" {
		// Empty would mean "recast's default" in Config; recast adds this
		// flag to every mode anyway.
		s.SQLMode = "NO_AUTO_VALUE_ON_ZERO"
	}
	return s, nil
}

// HasMode reports whether the sql_mode list mode holds flag.
func HasMode(mode, flag string) bool {
	for _, f := range strings.Split(mode, ",") {
		if strings.EqualFold(strings.TrimSpace(f), flag) {
			return true
		}
	}
	return false
}

// WithMode returns the sql_mode list mode plus flag (once).
func WithMode(mode, flag string) string {
	if HasMode(mode, flag) {
		return mode
	}
	if strings.TrimSpace(mode) == "" {
		return flag
	}
	return mode + "," + flag
}

// WithoutMode returns the sql_mode list mode without flag.
func WithoutMode(mode, flag string) string {
	var keep []string
	for _, f := range strings.Split(mode, ",") {
		if f = strings.TrimSpace(f); f != "" && !strings.EqualFold(f, flag) {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, ",")
}

// QuoteString quotes s as a single-quoted SQL string literal.
func QuoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

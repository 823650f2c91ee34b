package flavor

// RenameUnderLockTables reports whether the server lets the session that
// holds LOCK TABLES rename the tables it has locked WRITE (MySQL 8.0.13+).
// MariaDB refuses RENAME TABLE under LOCK TABLES (error 1192, checked on
// 10.11 and 11.8); its ALTER TABLE ... RENAME under LOCK TABLES renames one
// table at a time, releasing the name in between.
func (s Server) RenameUnderLockTables() bool { return s.MySQL() && s.AtLeast(8, 0, 13) }

// SessionStateQuery selects one session's state (argument: its connection
// id; no row when it is gone). MySQL reads performance_schema.threads:
// information_schema.PROCESSLIST converts every session's statement text
// to utf8mb3 and fails (error 3854) when one holds other bytes.
func (s Server) SessionStateQuery() string {
	if s.MySQL() {
		return "SELECT PROCESSLIST_STATE FROM performance_schema.threads WHERE PROCESSLIST_ID = ?"
	}
	return "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?"
}

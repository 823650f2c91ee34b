package flavor

// MaxRowVersions is how many row versions an InnoDB table can accumulate
// through ALGORITHM=INSTANT ADD/DROP COLUMN before the server refuses
// another (error 4092, ER_INNODB_MAX_ROW_VERSION; the count is
// information_schema.INNODB_TABLES.TOTAL_ROW_VERSIONS and a rebuild resets
// it): 64 on MySQL 8.0.29 to 9.0, 255 from 9.1. 0 where no such limit
// exists (MariaDB: its instant ADD/DROP keeps no row versions of this kind;
// MySQL before 8.0.29: INSTANT only adds columns at the end).
func (s Server) MaxRowVersions() int {
	switch {
	case !s.MySQL() || !s.AtLeast(8, 0, 29):
		return 0
	case s.AtLeast(9, 1, 0):
		return 255
	}
	return 64
}

// HasNoCopy reports whether the server has ALGORITHM=NOCOPY (MariaDB 10.3+):
// in place without rebuilding the table. MySQL has only INPLACE, which may
// rebuild the table (in place, online, but unthrottled and serial on
// replicas).
func (s Server) HasNoCopy() bool { return s.MariaDB }

package flavor

// ReadSchemas names the schemas, besides the table's own and
// information_schema, that recast reads with SELECT and so needs the SELECT
// privilege on: on MySQL, performance_schema (metadata_locks, threads,
// processlist, events_statements_current, setup_instruments: the
// metadata-lock blockers and the sessions' states; unlike
// information_schema it is not readable by every account). None on MariaDB.
func (s Server) ReadSchemas() []string {
	if s.MySQL() {
		return []string{"performance_schema"}
	}
	return nil
}

package flavor

// TimestampMax is TIMESTAMP's last instant, in UTC. MariaDB 11.5 made the
// range the whole unsigned 32 bits on 64-bit builds (MDEV-32188): its
// TIMESTAMPs end in 2106, MySQL's and older MariaDB's in 2038. (The 11.8
// server's ALTER stores 2038-01-19 04:30 UTC, which 10.11 and MySQL 9.7
// refuse: TestZonedTimestampRange.)
func (s Server) TimestampMax() string {
	if s.MariaDB && s.AtLeast(11, 5, 0) {
		return "2106-02-07 06:28:15.999999"
	}
	return "2038-01-19 03:14:07.999999"
}

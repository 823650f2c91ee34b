package flavor

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in        string
		mariadb   bool
		maj, min  int
		isolation string
		status    string
		replicas  string
	}{
		{"10.11.19-MariaDB-0+deb12u1", true, 10, 11, "tx_isolation", "SHOW BINLOG STATUS", "SHOW SLAVE HOSTS"},
		{"5.5.5-10.11.6-MariaDB-log", true, 10, 11, "tx_isolation", "SHOW BINLOG STATUS", "SHOW SLAVE HOSTS"},
		{"11.8.9-MariaDB-0+deb13u1-log", true, 11, 8, "transaction_isolation", "SHOW BINLOG STATUS", "SHOW SLAVE HOSTS"},
		{"9.7.4-2", false, 9, 7, "transaction_isolation", "SHOW BINARY LOG STATUS", "SHOW REPLICAS"},
		{"8.0.36", false, 8, 0, "transaction_isolation", "SHOW MASTER STATUS", "SHOW REPLICAS"},
		{"8.0.21-log", false, 8, 0, "transaction_isolation", "SHOW MASTER STATUS", "SHOW SLAVE HOSTS"},
	} {
		s, err := Parse(c.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if s.MariaDB != c.mariadb || s.Major != c.maj || s.Minor != c.min {
			t.Errorf("Parse(%q) = %+v", c.in, s)
		}
		if got := s.IsolationVar(); got != c.isolation {
			t.Errorf("%q: IsolationVar = %s, want %s", c.in, got, c.isolation)
		}
		if got := s.BinlogStatusQuery(); got != c.status {
			t.Errorf("%q: BinlogStatusQuery = %s, want %s", c.in, got, c.status)
		}
		if got := s.ReplicaHostsQuery(); got != c.replicas {
			t.Errorf("%q: ReplicaHostsQuery = %s, want %s", c.in, got, c.replicas)
		}
	}
	if _, err := Parse("garbage"); err == nil {
		t.Error("Parse(garbage) succeeded")
	}
}

// TestTimestampMax: MariaDB 11.5 and later end TIMESTAMP in 2106.
func TestTimestampMax(t *testing.T) {
	for in, want := range map[string]string{
		"10.11.19-MariaDB-0+deb12u1":   "2038-01-19 03:14:07.999999",
		"11.4.5-MariaDB":               "2038-01-19 03:14:07.999999",
		"11.8.9-MariaDB-0+deb13u1-log": "2106-02-07 06:28:15.999999",
		"9.7.4-2":                      "2038-01-19 03:14:07.999999",
	} {
		s, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.TimestampMax(); got != want {
			t.Errorf("%s: TimestampMax = %s, want %s", in, got, want)
		}
	}
}

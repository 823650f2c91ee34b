package migration

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recast-osc/recast/internal/testutil"
	"github.com/recast-osc/recast/internal/throttle"
)

// TestDeferrableIndexes: from SHOW CREATE TABLE as MariaDB and MySQL print
// it, only plain non-unique keys are left out of the copy, in their order,
// with their options; unique, primary, FULLTEXT, SPATIAL, VECTOR and
// functional keys stay, a plain key followed by a kept SPATIAL or
// functional key (or the copy's key) stays too (built after it, it would
// be listed after it), and a table with a foreign key keeps everything.
func TestDeferrableIndexes(t *testing.T) {
	for _, c := range []struct {
		name, create string
		keep         []string
		want         []string
	}{
		{name: "mariadb", create: "CREATE TABLE `t` (\n" +
			"  `id` int(11) NOT NULL,\n  `k` int(11) NOT NULL,\n  `c` varchar(20) DEFAULT NULL,\n  `g` geometry NOT NULL,\n" +
			"  PRIMARY KEY (`id`),\n  UNIQUE KEY `uk` (`k`,`id`),\n  SPATIAL KEY `sp` (`g`),\n  KEY `k_1` (`k`),\n" +
			"  KEY `c_p` (`c`(5),`k` DESC) COMMENT 'a, \\'quoted\\' comment',\n  KEY `ign` (`c`) IGNORED,\n" +
			"  KEY `we``ird` (`k`) USING BTREE,\n  FULLTEXT KEY `ft` (`c`),\n  VECTOR KEY `v` (`e`)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci",
			want: []string{"KEY `k_1` (`k`)", "KEY `c_p` (`c`(5),`k` DESC) COMMENT 'a, \\'quoted\\' comment'", "KEY `ign` (`c`) IGNORED", "KEY `we``ird` (`k`) USING BTREE"}},
		{name: "mysql", create: "CREATE TABLE `t` (\n" +
			"  `id` int NOT NULL,\n  `k` int NOT NULL,\n  `c` varchar(20) DEFAULT NULL,\n" +
			"  PRIMARY KEY (`id`),\n  KEY `fn` ((lower(`c`))),\n  KEY `mixed` (`k`,((`k` + 1))),\n" +
			"  KEY `k_1` (`k`),\n  KEY `inv` (`c`) /*!80000 INVISIBLE */\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
			want: []string{"KEY `k_1` (`k`)", "KEY `inv` (`c`) /*!80000 INVISIBLE */"}},
		// As the three servers print KEY a, SPATIAL KEY s, KEY b: a built
		// after the copy would come after s.
		{name: "spatial-between", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `x` int DEFAULT NULL,\n  `y` int DEFAULT NULL,\n" +
			"  `g` point NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `a` (`x`),\n  SPATIAL KEY `s` (`g`),\n  KEY `b` (`y`)\n) ENGINE=InnoDB",
			want: []string{"KEY `b` (`y`)"}},
		// MySQL sorts functional keys with the keys on virtual columns,
		// after the other plain ones: a key on a virtual column before one
		// stays, a plain key is built after the copy.
		{name: "mysql-functional-last", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `x` int DEFAULT NULL,\n" +
			"  `g` int GENERATED ALWAYS AS ((`x` + 2)) VIRTUAL,\n  `s` int GENERATED ALWAYS AS ((`x` + 3)) STORED,\n" +
			"  PRIMARY KEY (`id`),\n  KEY `a` (`x`),\n  KEY `sk` (`s`),\n  KEY `gk` (`g`,`x`),\n  KEY `fx` (((`x` + 1))),\n  KEY `gk2` (`g`)\n) ENGINE=InnoDB",
			want: []string{"KEY `a` (`x`)", "KEY `sk` (`s`)", "KEY `gk2` (`g`)"}},
		{name: "keep", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `k` int NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`),\n  KEY `k_2` (`k`,`id`)\n) ENGINE=InnoDB",
			keep: []string{"K_1"}, want: []string{"KEY `k_2` (`k`,`id`)"}},
		{name: "keep-last", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `k` int NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`),\n  KEY `k_2` (`k`,`id`)\n) ENGINE=InnoDB",
			keep: []string{"k_2"}},
		{name: "foreign-key", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `p` int NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `p` (`p`),\n" +
			"  CONSTRAINT `fk` FOREIGN KEY (`p`) REFERENCES `parent` (`id`)\n) ENGINE=InnoDB"},
		{name: "none", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `note` varchar(20) DEFAULT 'KEY `x` (`id`)',\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB"},
	} {
		got := deferrableIndexes(c.create, c.keep...)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	for def, want := range map[string]string{"KEY `k_1` (`k`)": "k_1", "KEY `we``ird` (`k`)": "we`ird", "KEY `a b` (`x`)": "a b"} {
		if got, _, ok := indexName(def); !ok || got != want {
			t.Errorf("indexName(%q) = %q, %v; want %q", def, got, ok, want)
		}
	}
	if _, _, ok := indexName("KEY `open``"); ok {
		t.Error("indexName read a name that does not end")
	}
}

// TestReplicasPast: after the index build at t, a replica counts as past it
// only with a lag reading taken more than MaxLag after t and below MaxLag
// (a reading taken sooner cannot show a build the replica is still
// replaying); an unreadable lag is not past; no lag watched is.
func TestReplicasPast(t *testing.T) {
	at := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	lag := func(after, lag time.Duration, err string) throttle.ReplicaLag {
		return throttle.ReplicaLag{Name: "r", Lag: lag, Err: err, At: at.Add(after)}
	}
	for _, c := range []struct {
		name     string
		maxLag   time.Duration
		replicas []throttle.ReplicaLag
		want     bool
	}{
		{"not watched", 0, []throttle.ReplicaLag{lag(0, time.Hour, "")}, true},
		{"no replicas", time.Second, nil, true},
		{"read too soon", time.Second, []throttle.ReplicaLag{lag(500*time.Millisecond, 100*time.Millisecond, "")}, false},
		{"read late, caught up", time.Second, []throttle.ReplicaLag{lag(1500*time.Millisecond, 200*time.Millisecond, "")}, true},
		{"read late, behind", time.Second, []throttle.ReplicaLag{lag(3*time.Second, 2*time.Second, "")}, false},
		{"one of two behind", time.Second, []throttle.ReplicaLag{lag(2*time.Second, 0, ""), lag(2*time.Second, 1500*time.Millisecond, "")}, false},
		{"unreadable", time.Second, []throttle.ReplicaLag{lag(2*time.Second, 0, "connection refused")}, false},
	} {
		if got := replicasPast(throttle.State{MaxLag: c.maxLag, Replicas: c.replicas}, at); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDeferIndexesWaitsForReplicas: with --defer-indexes and replica lag
// watched, the migration goes on after the index build only once the
// replica has replayed it. The replica's SQL thread is stopped when the
// copy is done (as a serial replica is while it replays the build) and
// started again 3 s later: the cut-over must come after that, and the
// final table must have the index.
func TestDeferIndexesWaitsForReplicas(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	schema := testutil.NewSchema(t)
	db := testutil.DB(t, schema)
	testutil.Exec(t, db, "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(40) NOT NULL, b INT NOT NULL, KEY b_i (b))",
		"INSERT INTO t SELECT a.seq * 3 + k.k + 1, CONCAT('row-', a.seq), (a.seq * 3 + k.k) % 97 FROM (WITH RECURSIVE n (seq) AS (SELECT 0 UNION ALL SELECT seq + 1 FROM n WHERE seq < 999) SELECT seq FROM n) a, "+
			"(SELECT 0 k UNION ALL SELECT 1 UNION ALL SELECT 2) k")
	testutil.WaitReplicaCaughtUp(t, 0)
	rdb := testutil.ReplicaDB(t, 0, "")
	t.Cleanup(func() { rdb.Exec("START REPLICA SQL_THREAD") })

	o := testOptions(t, schema, "t", "ADD COLUMN c INT")
	// The replica named, not discovered: SHOW SLAVE HOSTS lists it only
	// while its IO thread is connected (a CI run once watched none, and
	// the test could not tell).
	o.DeferIndexes, o.MaxLag, o.Replicas = true, time.Second, []string{testutil.Sandbox(t).Replicas[0].Addr()}
	var restarted, cutover atomic.Int64
	started := make(chan struct{})
	o.Pause = func(ctx context.Context, point string) {
		switch point {
		case "copy-done":
			if _, err := rdb.ExecContext(ctx, "STOP REPLICA SQL_THREAD"); err != nil {
				t.Errorf("stop the replica: %v", err)
			}
			time.AfterFunc(3*time.Second, func() {
				defer close(started)
				restarted.Store(time.Now().UnixNano())
				if _, err := rdb.Exec("START REPLICA SQL_THREAD"); err != nil {
					t.Errorf("start the replica: %v", err)
				}
			})
		case "cutover:before-lock":
			cutover.CompareAndSwap(0, time.Now().UnixNano())
		}
	}
	_, err := runT(ctx, o)
	select { // the restart must not outlive the test
	case <-started:
	case <-time.After(5 * time.Second):
		t.Error("the replica was not started again within 5 s of the end (was the copy-done point reached?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	switch r, c := restarted.Load(), cutover.Load(); {
	case c == 0:
		t.Fatal("no cut-over seen")
	case r == 0 || c < r:
		t.Errorf("the cut-over began before the replica was started again (cut-over %v, restart %v)", time.Unix(0, c), time.Unix(0, r))
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND INDEX_NAME = 'b_i'", schema).Scan(&n); err != nil || n != 1 {
		t.Errorf("the final table's index b_i: %d rows (%v)", n, err)
	}
}

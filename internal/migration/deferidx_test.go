package migration

import (
	"slices"
	"testing"
)

// TestDeferrableIndexes: from SHOW CREATE TABLE as MariaDB and MySQL print
// it, only plain non-unique keys are left out of the copy, in their order,
// with their options; unique, primary, FULLTEXT, SPATIAL, VECTOR and
// functional keys stay, and a table with a foreign key keeps everything.
func TestDeferrableIndexes(t *testing.T) {
	for _, c := range []struct {
		name, create string
		keep         []string
		want         []string
	}{
		{name: "mariadb", create: "CREATE TABLE `t` (\n" +
			"  `id` int(11) NOT NULL,\n  `k` int(11) NOT NULL,\n  `c` varchar(20) DEFAULT NULL,\n  `g` geometry NOT NULL,\n" +
			"  PRIMARY KEY (`id`),\n  UNIQUE KEY `uk` (`k`,`id`),\n  KEY `k_1` (`k`),\n" +
			"  KEY `c_p` (`c`(5),`k` DESC) COMMENT 'a, \\'quoted\\' comment',\n  KEY `ign` (`c`) IGNORED,\n" +
			"  FULLTEXT KEY `ft` (`c`),\n  SPATIAL KEY `sp` (`g`),\n  KEY `we``ird` (`k`) USING BTREE\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci",
			want: []string{"KEY `k_1` (`k`)", "KEY `c_p` (`c`(5),`k` DESC) COMMENT 'a, \\'quoted\\' comment'", "KEY `ign` (`c`) IGNORED", "KEY `we``ird` (`k`) USING BTREE"}},
		{name: "mysql", create: "CREATE TABLE `t` (\n" +
			"  `id` int NOT NULL,\n  `k` int NOT NULL,\n  `c` varchar(20) DEFAULT NULL,\n" +
			"  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`),\n  KEY `inv` (`c`) /*!80000 INVISIBLE */,\n  KEY `fn` ((lower(`c`))),\n" +
			"  KEY `mixed` (`k`,((`k` + 1)))\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
			want: []string{"KEY `k_1` (`k`)", "KEY `inv` (`c`) /*!80000 INVISIBLE */"}},
		{name: "keep", create: "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `k` int NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k_1` (`k`),\n  KEY `k_2` (`k`,`id`)\n) ENGINE=InnoDB",
			keep: []string{"K_1"}, want: []string{"KEY `k_2` (`k`,`id`)"}},
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

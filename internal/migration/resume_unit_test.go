package migration

import "testing"

func TestOrphanOf(t *testing.T) {
	names := []string{"`_t_new`", "`t_rcnew`"}
	for _, c := range []struct {
		info, db string
		want     bool
	}{
		{"/* recast */ INSERT IGNORE INTO `s`.`_t_new` (`id`) SELECT `id` FROM `s`.`t` WHERE ...", "", true},
		{"/* recast */ REPLACE INTO `s`.`t_rcnew` (`id`) VALUES (?)", "other", true},
		{"/* recast */ UPDATE `_t_new` SET `v` = 1 WHERE `id` = 2", "s", true},
		{"/* recast */ UPDATE `_t_new` SET `v` = 1 WHERE `id` = 2", "s2", false},            // another schema's table of that name
		{"/* recast */ INSERT INTO `s2`.`_t_new` SELECT * FROM `s2`.`t`", "s", false},       // another schema's, named in full
		{"/* recast */ INSERT INTO `s`.`_t_new_x` SELECT * FROM `s`.`t_new_x`", "s", false}, // another table
	} {
		if got := orphanOf(c.info, c.db, "s", names); got != c.want {
			t.Errorf("orphanOf(%q, db %q) = %v, want %v", c.info, c.db, got, c.want)
		}
	}
}

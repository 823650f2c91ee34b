package dbconn

import "testing"

func TestTagged(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                Tag + "SELECT 1",
		Tag + "SELECT 1":          Tag + "SELECT 1",
		"/* other */ SHOW TABLES": Tag + "/* other */ SHOW TABLES",
		"/*!50000 SET @a = 1 */":  Tag + "/*!50000 SET @a = 1 */",
		"":                        Tag,
	} {
		if got := tagged(in); got != want {
			t.Errorf("tagged(%q) = %q, want %q", in, got, want)
		}
	}
}

//go:build !stress

package migration

// cutOverRounds is how many cut-overs TestCutOverUnderLoad runs in make test;
// make stress (-tags stress) runs more.
const cutOverRounds = 10

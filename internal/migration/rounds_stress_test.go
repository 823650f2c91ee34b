//go:build stress

package migration

const cutOverRounds = 100

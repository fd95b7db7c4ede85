//go:build !race

package jsonx_test

const raceEnabled = false

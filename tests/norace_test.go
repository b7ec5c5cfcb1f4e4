//go:build !race

package tests

// raceEnabled says the test binary was built with -race (see race_test.go).
const raceEnabled = false

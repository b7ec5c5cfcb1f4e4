//go:build race

package tests

// raceEnabled says the test binary was built with -race: the server binary
// is built the same way, so that go build reuses the packages the test
// binary compiled and the processes are checked for races too.
const raceEnabled = true

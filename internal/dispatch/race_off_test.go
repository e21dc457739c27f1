//go:build !race

package dispatch

// raceEnabled: see race_on_test.go.
const raceEnabled = false

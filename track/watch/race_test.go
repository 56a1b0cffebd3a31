//go:build race

package watch_test

// raceEnabled: under the race detector, which runs the code several times
// slower, the longest healthy workloads run a quarter of their windows (see
// longRun).
const raceEnabled = true

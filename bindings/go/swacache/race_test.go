//go:build race

package swacache

// raceEnabled is true under -race (timing tests skip themselves).
const raceEnabled = true

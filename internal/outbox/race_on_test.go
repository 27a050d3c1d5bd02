//go:build race

package outbox

// raceEnabled: under the race detector the large simulations run smaller.
const raceEnabled = true

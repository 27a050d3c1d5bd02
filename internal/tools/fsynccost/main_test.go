package main

import "testing"

// TestRun runs the measurement small, on the test's temporary directory.
func TestRun(t *testing.T) {
	if err := run(t.TempDir(), 1<<20, 3); err != nil {
		t.Fatal(err)
	}
}

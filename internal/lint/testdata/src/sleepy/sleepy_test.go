package sleepy

import (
	"testing"
	tm "time"
)

func TestSleeps(t *testing.T) {
	tm.Sleep(tm.Millisecond) // want `time\.Sleep in a test`
	wait := tm.Sleep         // want `time\.Sleep in a test`
	wait(tm.Millisecond)
	tm.Sleep(tm.Millisecond) //nolint:testsleep // a justified wait
	tm.Sleep(tm.Millisecond) /* want `time\.Sleep in a test` `needs a reason` */ //nolint:testsleep
	_ = tm.After(tm.Millisecond)
}

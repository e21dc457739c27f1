package sleepy

import "time"

// Pause is not a test: it may sleep.
func Pause() { time.Sleep(time.Millisecond) }

package wakeup

// SetRoundSignal installs the bus's test signal; call it before Run.
func SetRoundSignal(b *Bus, f func(ended bool)) { b.roundSignal = f }

// Pending is how many queues have a signal waiting for the next send round.
func Pending(b *Bus) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

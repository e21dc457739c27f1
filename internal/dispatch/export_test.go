package dispatch

// OnPumpEnd makes d tell f the queue of every pump that ends (retires, or
// stops with its queue or the dispatcher): a test signal.
func OnPumpEnd(d *Dispatcher, f func(queue string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onRetire = f
}

// Quiet reports whether d runs no pump and has no check waiting: every
// queue is retired.
func Quiet(d *Dispatcher) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active == 0 && len(d.sweep) == 0
}

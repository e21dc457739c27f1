package dispatch

// OnPumpEnd makes d tell f the queue of every pump that ends (retires, or
// stops with its queue or the dispatcher): a test signal.
func OnPumpEnd(d *Dispatcher, f func(queue string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onRetire = f
}

package ingest

// Waiting reports how many publishes wait in queue's lane for the next call:
// tests wait on it instead of sleeping while callers line up.
func (c *Coalescer) Waiting(queue string) int {
	c.mu.Lock()
	l := c.queues[queue]
	c.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

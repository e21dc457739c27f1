package metrics

// SetBeforeStatusRead installs statusCollector.beforeRead, which runs each
// time a scrape found no fresh status read and is about to start or join one:
// tests learn from it that a scrape is waiting on the read.
func SetBeforeStatusRead(m *Metrics, f func()) { m.status.beforeRead = f }

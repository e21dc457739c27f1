package main

import (
	"fmt"
	"io"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/redisconn"
)

// checkRedis is check's part for the redis section. It reads the
// certificate files as start-up would, so a missing or broken one fails
// check too, and prints which mode is in effect (production.md §1, secrets
// redacted) as a YAML comment above the configuration, so the output still
// loads as a file. path is the --config file ("" for built-in defaults).
func checkRedis(cfg *config.Config, path string, stdout, stderr io.Writer) bool {
	if !cfg.Redis.Embedded() {
		if _, err := redisconn.Options(cfg.Redis); err != nil {
			source := path
			if source == "" {
				source = "built-in defaults"
			}
			fmt.Fprintf(stderr, "invalid configuration (%s):\n  %v\n", source, err)
			return false
		}
	}
	if cfg.Redis.TLS.InsecureSkipVerify {
		fmt.Fprintln(stderr, "warning: redis.tls.insecureSkipVerify is true: the Redis server's certificate is NOT verified; set redis.tls.caFile instead")
	}
	fmt.Fprintf(stdout, "# redis: %s\n", redisconn.Describe(cfg.Redis))
	return true
}

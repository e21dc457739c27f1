package app

import (
	"fmt"
	"io"
	"os"

	"github.com/simpleq/simpleqd/internal/config"
	"github.com/simpleq/simpleqd/internal/redisconn"
)

// check validates the configuration at path (with the environment's
// overrides, as serve would load it), warns about stray variables and prints
// the effective configuration with secrets redacted: exit code 0, or 1 with
// every problem.
func check(path string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(path, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, v := range strayEnv(cfg) {
		fmt.Fprintf(stderr, "warning: %s is set but not read: %s\n", v.Name, v.Why)
	}
	if !checkRedis(cfg, path, stdout, stderr) {
		return 1
	}
	fmt.Fprint(stdout, cfg.Redacted())
	return 0
}

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

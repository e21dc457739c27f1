package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// StrayVariable is an environment variable that looks like a setting but
// that Load does not read.
type StrayVariable struct {
	// Name is the variable as set.
	Name string
	// Why says what is wrong with it, naming the variable probably meant
	// when there is one.
	Why string
}

// daemonPrefix is the prefix an operator may reach for by the binary's
// name; settings' variables use EnvPrefix.
const daemonPrefix = "SIMPLEQD_"

// StrayEnv finds environment variables that look meant for the
// configuration but that Load does not read: a misspelt SIMPLEQ_ name, a
// queue that is not configured, or a setting under the binary's SIMPLEQD_
// prefix. Load looks variables up by name, so such a variable would
// otherwise be ignored without a word, and a typo in SIMPLEQ_REDIS_ADDR
// would leave a daemon on its embedded store.
//
// environ has os.Environ's form. known lists variables with the prefix that
// are read elsewhere (the CLI's, the daemon's own switches); a queue's
// signingSecretEnv is known already. Empty variables are left out, as Load
// treats them as unset.
func StrayEnv(c *Config, environ []string, known ...string) []StrayVariable {
	read := map[string]bool{}
	for _, k := range known {
		read[k] = true
	}
	settings := envNames(EnvPrefix, topSchema(c))
	for name, q := range c.Queues {
		settings = append(settings, envNames(EnvPrefix+"_QUEUES_"+envToken(name), queueSchema(&q))...)
	}
	// The variables that keys tagged env name (signingSecretEnv, keyEnv,
	// passwordEnv, …) are read too.
	for _, env := range envVariables(reflect.ValueOf(*c)) {
		read[env] = true
	}
	for _, s := range settings {
		read[s] = true
	}
	slices.Sort(settings)

	var stray []StrayVariable
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if val == "" || read[name] {
			continue
		}
		switch {
		case strings.HasPrefix(name, EnvPrefix+"_"):
			why := "no setting has this name"
			if s := nearestName(name, settings); s != "" {
				why += fmt.Sprintf(" (did you mean %s?)", s)
			} else if strings.HasPrefix(name, EnvPrefix+"_QUEUES_") {
				why += " (queue variables apply only to queues the file configures)"
			}
			stray = append(stray, StrayVariable{Name: name, Why: why})
		case strings.HasPrefix(name, daemonPrefix):
			// Other SIMPLEQD_ variables may belong to other tools; only one
			// that is a setting under the wrong prefix is surely a mistake.
			if meant := EnvPrefix + "_" + strings.TrimPrefix(name, daemonPrefix); read[meant] {
				stray = append(stray, StrayVariable{Name: name,
					Why: fmt.Sprintf("settings' variables start with %s_ (did you mean %s?)", EnvPrefix, meant)})
			}
		}
	}
	slices.SortFunc(stray, func(a, b StrayVariable) int { return strings.Compare(a.Name, b.Name) })
	return stray
}

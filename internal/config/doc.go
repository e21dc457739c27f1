// Package config turns the operator's YAML file and SIMPLEQ_* environment
// variables into one validated, fully resolved [Config].
//
// It exists as its own package so that every daemon of a fleet derives exactly
// the same settings from the same file, and so that nothing else in simpleqd
// has to know about defaults, overrides or units: the dispatcher, the store and
// the API only ever see a [Queue] whose every field already holds its effective
// value.
//
// Design points, each for a reason:
//
//   - The file is read through viper, configured with the "::" key delimiter,
//     because queue names may contain dots, which viper's default delimiter
//     would split into nested keys.
//   - viper lowercases keys, but queue names are case-sensitive; the file's
//     own key spelling is therefore recovered from a second, structural YAML
//     parse. Two queue names that differ only in letter case are rejected
//     because viper cannot keep them apart.
//   - The schema is one set of tagged structs ([Config] and the types it
//     holds; tags.go lists the tags). Decoding, "did you mean", the
//     SIMPLEQ_ variables, secrets never echoed, `simpleqd check`'s output
//     ([Config.Redacted]), the reload diff ([ChangedSettings]) and what a
//     reload cannot apply ([RestartChanges], [KeepRunning]) all walk those
//     tags, so a new setting is one tagged field and no list can fall
//     behind it.
//   - Environment overrides are looked up by the names the tags give,
//     through an injected getenv function instead of viper.AutomaticEnv, so
//     that Load has no hidden dependency on the process environment and tests
//     can run in parallel.
//   - Durations accept Go duration strings ("1500ms", "2m") or plain numbers
//     of seconds (0.25 is 250ms), because tests need millisecond timings and
//     operators like to write "30".
//   - Validation collects every problem before failing, each naming the full
//     key path, so a broken file is fixed in one pass instead of one restart
//     per mistake, and a daemon never starts half-configured.
package config

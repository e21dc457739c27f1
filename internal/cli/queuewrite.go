package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Queues over the API (runtime.md §1): "simpleqd queue create|set|delete
// NAME" beside "simpleqd queue NAME", which shows one.

// EnvSigningSecret is where "queue create" reads the signing secret from
// when --signing-secret-file is not given: like the API key,
// a secret never comes from a flag (shell history, the process list).
const EnvSigningSecret = "SIMPLEQ_SIGNING_SECRET"

const queueUsage = "queue NAME | queue create NAME --webhook-url URL [settings] | queue set NAME [settings] | queue delete NAME [--purge]"

// queueWriteCmd is "queue": show one queue, or create, change or delete
// one created over the API.
func queueWriteCmd(fs *pflag.FlagSet) func(context.Context, *call) error {
	show := queueCmd(fs)
	webhook := fs.String("webhook-url", "", "create, set: the webhook URL")
	secretFile := fs.String("signing-secret-file", "", "create, set: read the signing secret from FILE (- for stdin); create's default is $"+EnvSigningSecret)
	mode := fs.String("mode", "", "create, set: standard or ack")
	conc := fs.Int("concurrency", 0, "create, set: deliveries in flight at once, fleet-wide")
	rmax := fs.Int("rate-limit-max", 0, "create, set: deliveries started per window (0: no rate limit)")
	rwin := fs.String("rate-limit-window", "", "create, set: the rate limit's window, in seconds or like 1m")
	attempts := fs.Int("max-attempts", 0, "create, set: deliveries before a job is dead")
	sets := fs.StringArray("set", nil, "create, set: any setting as KEY=VALUE, named as in the file (backoff.max=60); VALUE is JSON, or a string; KEY=null (set) restores the file's default")
	purge := fs.Bool("purge", false, "delete: also remove every job of the queue (refused otherwise while jobs wait or are in flight)")
	return func(ctx context.Context, c *call) error {
		verb := c.args[0]
		switch verb {
		case "create", "set", "delete":
		default:
			if len(c.args) != 1 {
				return usagef("unknown action %q (create, set or delete), or one queue name to show", verb)
			}
			return show(ctx, c)
		}
		if len(c.args) != 2 {
			return usagef("%s needs one queue name", verb)
		}
		name := c.args[1]
		path := "/v1/queues/" + url.PathEscape(name)
		settingFlags := []string{"webhook-url", "signing-secret-file", "mode", "concurrency", "rate-limit-max", "rate-limit-window", "max-attempts", "set"}
		if verb == "delete" {
			for _, f := range settingFlags {
				if flagGiven(fs, f) {
					return usagef("--%s is for create and set", f)
				}
			}
			var query url.Values
			if *purge {
				query = url.Values{"purge": {"true"}}
			}
			raw, _, err := c.api.do(ctx, http.MethodDelete, path, query, []byte("{}"))
			if err != nil {
				return err
			}
			if c.json {
				return c.printRaw(raw)
			}
			fmt.Fprintf(c.env.Stdout, "deleted queue %s\n", name)
			return nil
		}
		if flagGiven(fs, "purge") {
			return usagef("--purge is for delete")
		}
		spec := map[string]any{}
		for _, kv := range *sets {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--set wants KEY=VALUE (got %q)", kv)
			}
			setPath(spec, k, jsonOrString(v))
		}
		if flagGiven(fs, "webhook-url") {
			spec["webhookUrl"] = *webhook
		}
		if flagGiven(fs, "mode") {
			spec["mode"] = *mode
		}
		if flagGiven(fs, "concurrency") {
			spec["concurrency"] = *conc
		}
		if flagGiven(fs, "rate-limit-max") {
			spec["rateLimitMax"] = *rmax
		}
		if flagGiven(fs, "rate-limit-window") {
			spec["rateLimitWindow"] = jsonOrString(*rwin)
		}
		if flagGiven(fs, "max-attempts") {
			spec["maxAttempts"] = *attempts
		}
		// create falls back to $SIMPLEQ_SIGNING_SECRET; set changes the
		// secret only when told to (--signing-secret-file).
		secret, err := "", error(nil)
		if verb == "create" || *secretFile != "" {
			secret, err = readSecret(*secretFile, c.env)
		}
		if err != nil {
			return err
		}
		if secret != "" {
			spec["signingSecret"] = secret
		}
		if verb == "set" && len(spec) == 0 {
			return usagef("set needs at least one setting")
		}
		body, err := json.Marshal(spec)
		if err != nil {
			return fmt.Errorf("encode settings: %w", err)
		}
		method := http.MethodPut
		if verb == "set" {
			method = http.MethodPatch
		}
		raw, status, err := c.api.do(ctx, method, path, nil, body)
		if err != nil {
			return err
		}
		if c.json {
			return c.printRaw(raw)
		}
		var q struct {
			Concurrency int     `json:"concurrency"`
			Hint        *string `json:"signingSecretHint"`
		}
		if err := decodeInto(raw, &q); err != nil {
			return err
		}
		what := map[int]string{http.StatusCreated: "created", http.StatusOK: "replaced"}[status]
		if verb == "set" {
			what = "changed"
		}
		hint := "none"
		if q.Hint != nil {
			hint = "…" + *q.Hint
		}
		fmt.Fprintf(c.env.Stdout, "%s queue %s (concurrency %d, signing secret %s)\n", what, name, q.Concurrency, hint)
		return nil
	}
}

// readSecret reads the signing secret from file (- for stdin), else from
// $SIMPLEQ_SIGNING_SECRET; "" when neither gives one. A trailing newline
// (echo, a file saved by an editor) is not part of the secret.
func readSecret(file string, env Env) (string, error) {
	if file == "" {
		return env.Getenv(EnvSigningSecret), nil
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(env.Stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", usagef("read the signing secret: %v", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// jsonOrString reads a flag value as JSON (5, 1.5, true, null, {"a":1}),
// else as the string it is (https://…, 1m).
func jsonOrString(v string) any {
	var out any
	if err := json.Unmarshal([]byte(v), &out); err == nil {
		return out
	}
	return v
}

// setPath sets a dotted key (backoff.max) in nested maps.
func setPath(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
}

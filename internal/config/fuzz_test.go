package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as the config file (issue #8): it
// never panics; it either returns a configuration that passes its own
// validation (every queue has a webhook URL, positive limits) and can be
// printed redacted, or an error that names the file. Seeds: the shipped
// example shapes below and testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"",
		minimalQueue,
		"redis:\n  addr: 127.0.0.1:6379\nhttp:\n  listen: 0.0.0.0:8080\nauth:\n  apiKeys: [k1]\n" + minimalQueue,
		"defaults:\n  concurrency: 0\n  timeout: -1s\n" + minimalQueue,
		"queues:\n  a: &x\n    webhookUrl: http://h/x\n    signingSecret: s\n  b:\n    <<: *x\n",
		"queues:\n  'q q':\n    webhookUrl: ftp://x\n",
		"defaults: [1, 2]\n",
		"redis: {addr: 1}\ndispatch: {leaseMargin: 1e400}\n",
		"queues:\n  e:\n    webhookUrl: http://127.0.0.1:1/\n    signingSecretEnv: NOPE\n",
		"a: !!binary aGk=\n",
		"- - - -\n",
		"{",
		"queues: {e: {webhookUrl: 'http://x', signingSecret: s, backoff: {type: fixed, base: 1ms, max: 0}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path, nil)
		if err != nil {
			var cerr *Error
			if errors.As(err, &cerr) {
				if len(cerr.Problems) == 0 {
					t.Fatalf("config error without problems: %v", err)
				}
				return
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("nil config without an error")
		}
		for name, q := range cfg.Queues {
			if name == "" || q.WebhookURL == "" || q.Concurrency < 1 || q.MaxAttempts < 1 || q.Timeout <= 0 {
				t.Fatalf("accepted an invalid queue %q: %+v", name, q)
			}
		}
		_ = cfg.Redacted()
		_ = cfg.QueueNames()
	})
}

package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A secret of the wrong type is reported by key, never by value: the
// message is printed by "simpleqd check" and logged by a rejected reload.
func TestWrongTypedSecretsAreNotEchoed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("redis:\n  password: 918273645\nauth:\n  apiKeys: [564738291]\n"+
		"queues:\n  q:\n    webhookUrl: http://127.0.0.1:9/h\n    signingSecret: 192837465\n"), 0o600))
	_, err := Load(path, nil)
	require.Error(t, err)
	msg := err.Error()
	for _, key := range []string{"redis.password", "auth.apiKeys", "queues.q.signingSecret"} {
		require.Contains(t, msg, key)
	}
	for _, secret := range []string{"918273645", "564738291", "192837465"} {
		require.NotContains(t, msg, secret)
	}
}

package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func repoFile(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", name)
}

// The configs shipped in the repository must pass `simpleqd check`, since no
// container engine runs here to try docker-compose.yml for real.
func TestShippedConfigsPassCheck(t *testing.T) {
	t.Setenv("DEMO_SIGNING_SECRET", "whsec_demo_secret")
	for _, f := range []string{"simpleqd.example.yaml", "deploy/simpleqd.compose.yaml"} {
		var out, errb bytes.Buffer
		code := run([]string{"check", "--config", repoFile(f)}, &out, &errb)
		require.Equal(t, 0, code, "%s: %s", f, errb.String())
		require.Contains(t, out.String(), "queues:")
		require.NotContains(t, out.String(), "whsec_demo_secret", "secrets are redacted")
	}
}

func TestCheckRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	require.NoError(t, writeFile(path, "defaults:\n  concurrency: 0\n"))
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"check", "--config", path}, &out, &errb))
	require.True(t, strings.Contains(errb.String(), "defaults.concurrency"), errb.String())
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"frobnicate"}, &out, &errb))
}

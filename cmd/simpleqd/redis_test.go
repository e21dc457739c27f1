package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/internal/redistest"
)

// check says which Redis mode is in effect, first, as a comment, with no
// secret in it or anywhere in the output.
func TestCheckShowsRedisMode(t *testing.T) {
	t.Setenv("CHECK_REDIS_PW", "data-pw-value")
	certs := redistest.NewCerts(t)
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, writeFile(path, `redis:
  username: app
  passwordEnv: CHECK_REDIS_PW
  sentinel:
    masterName: mymaster
    addrs: ["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]
    password: sentinel-pw-value
  tls:
    enabled: true
    caFile: `+certs.CAFile+`
    certFile: `+certs.ClientCertFile+`
    keyFile: `+certs.ClientKeyFile+`
`))
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "--config", path}, &out, &errb), errb.String())
	first, _, _ := strings.Cut(out.String(), "\n")
	require.Equal(t, "# redis: sentinel (master mymaster via 3 sentinels: 10.0.0.1:26379, 10.0.0.2:26379, 10.0.0.3:26379), "+
		"TLS mutual (CA "+certs.CAFile+"), user app, password from $CHECK_REDIS_PW, sentinels as user default, password set, db 0, durability local", first)
	require.NotContains(t, out.String(), "data-pw-value")
	require.NotContains(t, out.String(), "sentinel-pw-value")
	require.Contains(t, out.String(), "passwordEnv: CHECK_REDIS_PW")

	out.Reset()
	require.NoError(t, writeFile(path, "redis: {url: \"rediss://alice:url-pw-value@redis.example.com:6380/2\"}\n"))
	require.Equal(t, 0, run([]string{"check", "--config", path}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "# redis: single (redis.example.com:6380), TLS on (system CAs), user alice, password in the URL, db 2")
	require.Contains(t, out.String(), "url: rediss://alice:xxxxx@redis.example.com:6380/2")
	require.NotContains(t, out.String(), "url-pw-value")
}

// A certificate file start-up could not use fails check too, naming the
// key, the file and the reason; insecureSkipVerify passes with a warning.
func TestCheckReadsCertificateFiles(t *testing.T) {
	dir := t.TempDir()
	path, missing := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "missing-ca.pem")
	require.NoError(t, writeFile(path, "redis: {url: \"rediss://127.0.0.1:6380\", tls: {caFile: "+missing+"}}\n"))
	var out, errb bytes.Buffer
	require.Equal(t, 1, run([]string{"check", "--config", path}, &out, &errb))
	require.Empty(t, out.String())
	require.Contains(t, errb.String(), "invalid configuration ("+path+")")
	require.Contains(t, errb.String(), "redis.tls.caFile "+missing+": no such file or directory")

	errb.Reset()
	require.NoError(t, writeFile(path, "redis: {addr: \"127.0.0.1:6380\", tls: {enabled: true, insecureSkipVerify: true}}\n"))
	require.Equal(t, 0, run([]string{"check", "--config", path}, &out, &errb))
	require.Contains(t, errb.String(), "warning: redis.tls.insecureSkipVerify is true")
	require.Contains(t, out.String(), "server NOT verified")
}

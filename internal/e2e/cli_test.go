package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cliResult is one run of the simpleqd binary.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runBinary runs the built simpleqd with env (SIMPLEQ_* from the test's own
// environment are dropped so the test is hermetic).
func runBinary(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SIMPLEQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return cliResult{code, out.String(), errb.String()}
}

var jobIDPattern = regexp.MustCompile(`job_[0-9a-z]+_[A-Za-z0-9._-]+`)

// TestCLIAgainstDaemon drives every operator command of the built binary
// against a real daemon with an API key: publish (exact payload bytes,
// idempotency), job, queues, queue, dead, replay, pause, resume, and the
// error paths with their exit codes.
func TestCLIAgainstDaemon(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(dl Delivery) Reply {
		if bytes.Contains(dl.Body, []byte(`"fail":true`)) {
			return Reply{Status: 500, Body: "boom"}
		}
		return Reply{Status: 200}
	})
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, LogLevel: "info",
		YAML: "auth:\n  apiKeys: [sk_cli_test]\n" + QueueYAML("emails", hook.URL, "maxAttempts: 1")})
	env := []string{"SIMPLEQ_URL=" + d.URL, "SIMPLEQ_API_KEY=sk_cli_test"}
	cli := func(args ...string) cliResult {
		t.Helper()
		return runBinary(t, env, args...)
	}
	job := func(id string) map[string]any {
		t.Helper()
		r := d.Do("GET", "/v1/jobs/"+id, nil, "Authorization", "Bearer sk_cli_test")
		require.Equal(t, 200, r.Status, string(r.Body))
		return r.JSON(t)
	}
	waitStatus := func(id, status string) {
		t.Helper()
		require.Eventually(t, func() bool { return job(id)["status"] == status }, 10*time.Second, 10*time.Millisecond,
			"job %s never reached %s", id, status)
	}

	// publish: the payload's bytes arrive unchanged (a big integer stays exact).
	r := cli("publish", "emails", "--payload", `{"n":12345678901234567890,"to":"a@b.com"}`, "--idempotency-key", "order-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^published job_\S+_emails to emails \(pending\)\n$`, r.stdout)
	id := jobIDPattern.FindString(r.stdout)
	r = cli("publish", "emails", "--payload", `{"n":1}`, "--idempotency-key", "order-1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var pub map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &pub))
	require.Equal(t, id, pub["id"], "an idempotent repeat answers the first job")

	waitStatus(id, "completed")
	require.Contains(t, string(hook.Deliveries()[0].Body), `"payload":{"n":12345678901234567890,"to":"a@b.com"}`)

	// job: a table, or the API's JSON.
	r = cli("job", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "status          completed\n")
	require.Contains(t, r.stdout, "idempotencyKey  order-1\n")
	require.Regexp(t, `(?m)^1\s+success\s+200\s`, r.stdout)
	r = cli("job", "--json", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"payload":{"n":12345678901234567890,"to":"a@b.com"}`)

	// queues / queue.
	r = cli("queues")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^NAME\s+MODE\s+PENDING\s+PROCESSING\s+AWAITING ACK\s+DEAD\s+CONCURRENCY\s+RATE LIMIT\s+STATE\n`+
		`emails\s+standard\s+0\s+0\s+0\s+0\s+10\s+none\s+open\n$`, r.stdout)

	// dead and replay: a job that fails once (maxAttempts 1) is dead.
	r = cli("publish", "emails", "--payload", `{"fail":true}`)
	require.Equal(t, 0, r.code, r.stderr)
	deadID := jobIDPattern.FindString(r.stdout)
	waitStatus(deadID, "dead")
	r = cli("dead", "emails")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, deadID+`\s+max_attempts_exhausted\s+1\s+0\s`, r.stdout)
	require.Contains(t, r.stdout, "webhook responded 500: boom")
	r = cli("replay", "emails", deadID, "job_01m8nmd2n9zpk466n81k5saag3_emails")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "replayed 1 of 2 job(s) of emails (1 skipped: not dead jobs of this queue)\n", r.stdout)
	waitStatus(deadID, "dead") // it fails again
	r = cli("replay", "emails", "--all", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"replayed":1}`, r.stdout)
	waitStatus(deadID, "dead")

	// pause / resume.
	r = cli("pause", "emails", "--reason", "maintenance window")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "paused emails: now paused (maintenance window)\n", r.stdout)
	r = cli("publish", "emails")
	require.Equal(t, 0, r.code, r.stderr)
	held := jobIDPattern.FindString(r.stdout)
	r = cli("queue", "emails")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "state         paused (maintenance window)\n")
	require.Contains(t, r.stdout, "pending       1\n")
	require.Equal(t, "pending", job(held)["status"])
	r = cli("resume", "emails")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "resumed emails: now open\n", r.stdout)
	waitStatus(held, "completed")

	// Errors and exit codes.
	r = runBinary(t, []string{"SIMPLEQ_URL=" + d.URL}, "queues")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "simpleqd queues: unauthorized (HTTP 401); set SIMPLEQ_API_KEY")
	r = cli("job", "job_01m8nmd2n9zpk466n81k5saag3_emails")
	require.Equal(t, 3, r.code)
	require.Equal(t, "simpleqd job: Job not found (HTTP 404)\n", r.stderr)
	r = cli("publish", "nope")
	require.Equal(t, 3, r.code)
	require.Equal(t, "simpleqd publish: Queue 'nope' not found (HTTP 404)\n", r.stderr)
	r = cli("publish", "emails", "--delay", "100000")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "simpleqd publish: invalid request (HTTP 400)\n  delay: ")
	r = cli("publish", "emails", "--payload", "not json")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "the payload must be a JSON object")
	r = runBinary(t, []string{"SIMPLEQ_API_KEY=sk_cli_test"}, "queues", "--url", "http://127.0.0.1:1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "cannot reach simpleqd at http://127.0.0.1:1")

	require.NotContains(t, d.Log(), "sk_cli_test", "the API key never reaches the log")
	require.NotContains(t, d.Log(), "12345678901234567890", "payloads never reach the log")
}

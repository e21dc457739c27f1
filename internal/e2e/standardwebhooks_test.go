package test

// Signatures that rotate and resist replay (production.md §3), end to end:
//
//   - TestStandardWebhooksLibrary: a webhook built on the Standard Webhooks
//     specification's own TypeScript library (npm "standardwebhooks",
//     pinned in internal/e2e/standardwebhooks/package-lock.json) verifies real
//     deliveries from a daemon, for every way a queue can name its secrets,
//     each active secret on its own.
//   - TestSecretRotation: the rotation procedure of docs/operations.md, step
//     by step through live reloads, against a receiver on the Go SDK that
//     never refuses a delivery; at each step the headers show which secrets
//     sign what, and a captured delivery replayed after the tolerance is
//     refused by the SDK's verifier.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/simpleq/simpleqd/client/webhook"
	"github.com/simpleq/simpleqd/internal/redistest"
)

const (
	// swNew is in the Standard Webhooks form (whsec_ + base64 of 32 bytes);
	// swOld is not, so it is used as raw bytes.
	swNew    = "whsec_c3RhbmRhcmQgd2ViaG9va3MgdGVzdCBrZXksIG5ldyE="
	swOld    = "old-raw-secret-from-before-rotation"
	swSingle = "whsec_YSBxdWV1ZSB3aXRoIG9uZSB3aHNlY18gc2VjcmV0Li4="
	// swAPIMD is api.md's known-answer secret: whsec_ but not base64 after
	// it, so raw bytes as well.
	swAPIMD = "whsec_test_secret"
)

var (
	swNpmOnce sync.Once
	swNpmErr  error
)

// swPrepare installs the pinned library with `npm ci` (once per run, and
// only when node_modules lacks it) and returns its directory. Without node
// or npm the test skips, except in CI, where it must run.
func swPrepare(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(exRoot(t), "internal", "e2e", "standardwebhooks")
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI: %v", tool, err)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	swNpmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			swNpmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	require.NoError(t, swNpmErr)
	return dir
}

// swSecret is one secret a queue's deliveries must verify with, and how the
// library is to be given it ("whsec": as is; "raw": its bytes, format raw).
type swSecret struct {
	Secret string `json:"secret"`
	Format string `json:"format"`
}

// swResult is what the library said about one delivery.
type swResult struct {
	Queue     string   `json:"queue"`
	ID        string   `json:"id"`
	Timestamp string   `json:"timestamp"`
	Signature string   `json:"signature"`
	Verdicts  []string `json:"verdicts"`
}

func TestStandardWebhooksLibrary(t *testing.T) {
	t.Parallel()
	swPrepare(t)
	rs := Redis(t)
	port := redistest.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	queues := map[string][]swSecret{
		// mid-rotation: both secrets sign webhook-signature
		"rotating": {{swNew, "whsec"}, {swOld, "raw"}},
		"single":   {{swSingle, "whsec"}},
		"apimd":    {{swAPIMD, "raw"}},
		// signingSecretsEnv: the list from one variable, space-separated
		"fromenv": {{swSingle, "whsec"}, {"env-raw-secret", "raw"}},
	}
	yaml := "defaults:\n  maxAttempts: 3\n  backoff: {type: fixed, base: 100ms}\nqueues:\n" +
		fmt.Sprintf("  rotating:\n    webhookUrl: %s/hooks/rotating\n    signingSecrets: [%s, %s]\n", base, swNew, swOld) +
		fmt.Sprintf("  single:\n    webhookUrl: %s/hooks/single\n    signingSecret: %s\n", base, swSingle) +
		fmt.Sprintf("  apimd:\n    webhookUrl: %s/hooks/apimd\n    signingSecret: %s\n", base, swAPIMD) +
		fmt.Sprintf("  fromenv:\n    webhookUrl: %s/hooks/fromenv\n    signingSecretsEnv: SW_SECRETS\n", base)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml, LogLevel: "info",
		Env: []string{"SW_SECRETS=" + swSingle + " env-raw-secret"}})
	queuesJSON, err := json.Marshal(queues)
	require.NoError(t, err)
	exStart(t, exExample{name: "standardwebhooks", interp: "node", path: "internal/e2e/standardwebhooks/verify.mjs"},
		[]string{"LISTEN=127.0.0.1:" + strconv.Itoa(port), "QUEUES=" + string(queuesJSON)}, port)

	var ids []string
	for q := range queues {
		for i := range 3 {
			ids = append(ids, d.Publish(q, map[string]any{"i": i, "big": json12345678901234567890()}))
		}
	}
	retried := d.Publish("rotating", map[string]any{"failFirst": true})
	for _, id := range append(ids, retried) {
		j := d.WaitStatus(id, "completed", 30*time.Second)
		require.Len(t, j["history"], map[bool]int{true: 2, false: 1}[id == retried], "job %s: %v", id, j["history"])
	}

	resp, err := http.Get(base + "/results")
	require.NoError(t, err)
	var results []swResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&results))
	resp.Body.Close()
	require.Len(t, results, len(ids)+2, "one verified delivery per job, two for the retried one")
	idForm := regexp.MustCompile(`^(job_[0-9a-z]{26}_[A-Za-z0-9._-]+):([0-9]+)$`)
	seen := map[string]bool{}
	for _, r := range results {
		for i, v := range r.Verdicts {
			require.Equal(t, "ok", v, "queue %s, delivery %s: the library refused it with secret %d alone", r.Queue, r.ID, i+1)
		}
		require.Len(t, strings.Fields(r.Signature), len(queues[r.Queue]), "one v1 entry per active secret: %q", r.Signature)
		m := idForm.FindStringSubmatch(r.ID)
		require.NotNil(t, m, "webhook-id %q is <jobId>:<attempt>", r.ID)
		ts, err := strconv.ParseInt(r.Timestamp, 10, 64)
		require.NoError(t, err)
		require.InDelta(t, time.Now().Unix(), ts, 60, "webhook-timestamp is the attempt's Unix seconds")
		seen[r.ID] = true
	}
	require.True(t, seen[retried+":1"] && seen[retried+":2"], "a retry is a new attempt with a new webhook-id")

	// The library refuses what it should: a delivery signed right but ten
	// minutes ago (a replay), and one whose body was altered.
	body := []byte(`{"id":"job_x_single","queue":"single","payload":{},"attempt":1,"maxAttempts":3,"deferCount":0,"createdAt":"2026-01-01T00:00:00.000Z"}`)
	post := func(at time.Time, sent []byte) (int, string) {
		req, err := http.NewRequest("POST", base+"/hooks/single", strings.NewReader(string(sent)))
		require.NoError(t, err)
		req.Header.Set("Webhook-Id", "job_x_single:1")
		req.Header.Set("Webhook-Timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("Webhook-Signature", webhook.SignStandard([]string{swSingle}, "job_x_single:1", at, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, msg := post(time.Now().Add(-10*time.Minute), body)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "too old")
	code, msg = post(time.Now(), []byte(strings.Replace(string(body), "{}", `{"x":1}`, 1)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, msg, "No matching signature")
	code, _ = post(time.Now(), body)
	require.Equal(t, http.StatusOK, code, "the test's own signing agrees with the library")

	// No secret reaches the daemon's log.
	for _, s := range []string{swNew, swOld, swSingle, swAPIMD, "env-raw-secret"} {
		require.NotContains(t, d.Log(), s)
	}
}

// TestSecretRotation walks docs/operations.md's rotation procedure with
// live reloads. The receiver is the Go SDK's Verifier holding what the
// procedure says receivers hold at each step; it answers 401 to anything
// it refuses, so any refusal fails a job. The headers of each step's
// delivery show the daemon's side: which secret signs x-simpleq-signature
// (SimpleQ's one-secret scheme) and which sign webhook-signature.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	const oldS, newS = "whsec_b2xkLW9sZC1vbGQtb2xkLW9sZC1vbGQtb2xkLW9sZCE=", "new-raw-secret-after-rotation"
	var mu sync.Mutex
	receiver := []string{oldS}
	hook := NewWebhook(t, func(dl Delivery) Reply {
		mu.Lock()
		v := webhook.Verifier{Secrets: receiver}
		mu.Unlock()
		if err := v.Verify(dl.Header, dl.Body); err != nil {
			return Reply{Status: 401, Body: err.Error()}
		}
		return Reply{Status: 200}
	})
	rs := Redis(t)
	queue := func(secrets string) string {
		return "queues:\n  rot:\n    webhookUrl: " + hook.URL + "\n    maxAttempts: 1\n    " + secrets + "\n"
	}
	initial := queue("signingSecret: " + oldS)
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: initial, LogLevel: "debug"})
	ed := newConfigEditor(t, d, initial)

	// deliver publishes one job, requires it completed (the receiver
	// verified it) and returns its delivery.
	deliver := func(step string) Delivery {
		t.Helper()
		id := d.Publish("rot", map[string]any{"step": step})
		d.WaitStatus(id, "completed", 10*time.Second)
		for _, dl := range hook.Deliveries() {
			if dl.JobID == id {
				return dl
			}
		}
		t.Fatalf("%s: no delivery of %s", step, id)
		return Delivery{}
	}
	// signedBy reports which of the secrets sign x-simpleq-signature and
	// webhook-signature of dl, each checked alone.
	signedBy := func(dl Delivery) (simpleq, standard []string) {
		for _, s := range []string{oldS, newS} {
			if webhook.Verify([]string{s}, dl.Body, dl.Header.Get(webhook.SignatureHeader)) {
				simpleq = append(simpleq, s)
			}
			if (&webhook.Verifier{Secrets: []string{s}}).Verify(dl.Header, dl.Body) == nil {
				standard = append(standard, s)
			}
		}
		return simpleq, standard
	}
	reload := func(n int, secrets string) {
		t.Helper()
		ed.write(d.Config, queue(secrets))
		require.Eventually(t, func() bool { return reloadsBy(t, d, "file change") == n }, 10*time.Second, 10*time.Millisecond)
	}

	dl := deliver("0: one secret")
	simpleq, standard := signedBy(dl)
	require.Equal(t, []string{oldS}, simpleq)
	require.Equal(t, []string{oldS}, standard)

	// 1. Add the new secret second: receivers holding only the old one
	// still verify; nothing else changes for them.
	reload(1, fmt.Sprintf("signingSecrets: [%s, %s]", oldS, newS))
	dl = deliver("1: new added second")
	simpleq, standard = signedBy(dl)
	require.Equal(t, []string{oldS}, simpleq, "x-simpleq-signature stays the current (first) secret's")
	require.Equal(t, []string{oldS, newS}, standard, "webhook-signature carries both")

	// 2. Receivers accept both.
	mu.Lock()
	receiver = []string{oldS, newS}
	mu.Unlock()
	deliver("2: receivers accept both")

	// 3. Move the new secret first: it now signs x-simpleq-signature too
	// (SimpleQ's one-secret verifiers must have it by now); a receiver not
	// yet updated still verifies webhook-signature with the old one.
	reload(2, fmt.Sprintf("signingSecrets: [%s, %s]", newS, oldS))
	dl = deliver("3: new moved first")
	simpleq, standard = signedBy(dl)
	require.Equal(t, []string{newS}, simpleq)
	require.Equal(t, []string{oldS, newS}, standard)
	require.NoError(t, (&webhook.Verifier{Secrets: []string{oldS}}).Verify(dl.Header, dl.Body), "an old-secret receiver still verifies")

	// 4. Remove the old secret from the daemon, then from the receivers.
	reload(3, "signingSecret: "+newS)
	dl = deliver("4: old removed")
	simpleq, standard = signedBy(dl)
	require.Equal(t, []string{newS}, simpleq)
	require.Equal(t, []string{newS}, standard)
	require.Len(t, strings.Fields(dl.Header.Get(webhook.StandardSignatureHeader)), 1)
	mu.Lock()
	receiver = []string{newS}
	mu.Unlock()
	deliver("4: receivers drop the old secret")
	require.ErrorIs(t, (&webhook.Verifier{Secrets: []string{oldS}}).Verify(dl.Header, dl.Body), webhook.ErrBadSignature,
		"the old secret no longer verifies anything")

	// A captured delivery replayed later: genuine within the tolerance,
	// refused past it (either way), whoever replays it.
	ts, err := strconv.ParseInt(dl.Header.Get(webhook.TimestampHeader), 10, 64)
	require.NoError(t, err)
	sent := time.Unix(ts, 0)
	at := func(d time.Duration) *webhook.Verifier {
		return &webhook.Verifier{Secrets: []string{newS}, Now: func() time.Time { return sent.Add(d) }}
	}
	require.NoError(t, at(4*time.Minute).Verify(dl.Header, dl.Body))
	require.ErrorIs(t, at(6*time.Minute).Verify(dl.Header, dl.Body), webhook.ErrTimestamp)
	require.ErrorIs(t, at(-6*time.Minute).Verify(dl.Header, dl.Body), webhook.ErrTimestamp)
	v := at(6 * time.Minute)
	v.Tolerance = 10 * time.Minute
	require.NoError(t, v.Verify(dl.Header, dl.Body), "the tolerance is configurable")
	stripped := dl.Header.Clone()
	stripped.Del(webhook.StandardSignatureHeader)
	require.ErrorIs(t, at(0).Verify(stripped, dl.Body), webhook.ErrUntimestamped,
		"dropping the timestamped signature does not help a replayer")

	// The reloads named each step without a secret, and no secret reached
	// the log even at debug level.
	var changed []any
	for _, l := range logLines(t, d, "configuration reloaded") {
		changed = append(changed, l["queuesChanged"])
	}
	require.Equal(t, []any{[]any{"rot: signingSecrets"}, []any{"rot: signingSecret, signingSecrets"}, []any{"rot: signingSecrets"}}, changed)
	require.NotContains(t, d.Log(), oldS)
	require.NotContains(t, d.Log(), newS)
}

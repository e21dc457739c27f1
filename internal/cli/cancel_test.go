package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCancelOneAndBulk(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/jobs/job_01_emails/cancel": {200, `{"id":"job_01_emails","status":"dead","deadReason":"cancelled"}`},
		"POST /v1/queues/emails/cancel":      {200, `{"cancelled":7,"done":true}`},
	})
	r := runCLI(t, f, "", "cancel", "job_01_emails", "--reason", "not needed")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "cancelled job_01_emails: now dead (cancelled)\n", r.stdout)
	r = runCLI(t, f, "", "cancel", "--queue", "emails", "--status", "pending,processing")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "cancelled 7 pending/processing job(s) of emails\n", r.stdout)
	r = runCLI(t, f, "", "cancel", "--queue", "emails", "--all", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.JSONEq(t, `{"cancelled":7,"done":true}`, r.stdout)
	reqs := f.requests()
	require.Len(t, reqs, 3)
	require.Equal(t, `{"reason":"not needed"}`, string(reqs[0].Body))
	require.JSONEq(t, `{"status":["pending","processing"]}`, string(reqs[1].Body))
	require.JSONEq(t, `{"all":true}`, string(reqs[2].Body))

	for _, args := range [][]string{{"cancel"}, {"cancel", "--queue", "emails"}, {"cancel", "job_01_emails", "--all"},
		{"cancel", "job_01_emails", "--queue", "emails", "--all"}} {
		r = runCLI(t, f, "", args[0], args[1:]...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stdout)
	}
	require.Len(t, f.requests(), 3, "usage errors send nothing")
}

func TestPublishReplaceKey(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"POST /v1/queues/emails/jobs": {200, `{"id":"job_01_emails","status":"pending","createdAt":"2026-11-30T07:06:13.034Z","replaced":true}`},
	})
	r := runCLI(t, f, "", "publish", "emails", "--payload", `{"state":2}`, "--replace-key", "device-7")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "replaced the payload of job_01_emails (pending, never delivered); nothing new stored\n", r.stdout)
	require.Equal(t, `{"payload":{"state":2},"replaceKey":"device-7"}`, string(f.requests()[0].Body))
}

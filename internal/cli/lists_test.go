package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJobsCommand(t *testing.T) {
	f := newFakeAPI(t, map[string]answer{
		"GET /v1/queues/emails/jobs": {200, `{"jobs":[` + jobBody + `],"nextCursor":"abc"}`},
		"GET /v1/queues/empty/jobs":  {200, `{"jobs":[],"nextCursor":null}`},
	})
	r := runCLI(t, f, "", "jobs", "--queue", "emails", "--status", "dead", "--limit", "1", "--cursor", "xyz")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "cursor=xyz&limit=1&status=dead", f.requests()[0].Query)
	require.Contains(t, r.stdout, "job_01_emails")
	require.Contains(t, r.stdout, "3/3")
	require.Contains(t, r.stdout, "more: simpleqd jobs emails --status dead --limit 1 --cursor abc\n")

	r = runCLI(t, f, "", "jobs", "empty", "--status", "pending")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "no pending jobs in empty on this page\n", r.stdout)
	require.Equal(t, "limit=100&status=pending", f.requests()[1].Query)

	r = runCLI(t, f, "", "jobs", "emails", "--status", "pending", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"nextCursor":"abc"`)

	for _, args := range [][]string{
		{"jobs", "emails"},                                     // no status
		{"jobs", "emails", "--status", "waiting"},              // not a status
		{"jobs", "--status", "pending"},                        // no queue
		{"jobs", "a", "--queue", "b", "--status", "pending"},   // two queues
		{"jobs", "emails", "--status", "dead", "--limit", "0"}, // limit
	} {
		r := runCLI(t, f, "", args[0], args[1:]...)
		require.Equal(t, ExitUsage, r.code, "%v: %s", args, r.stdout)
	}
	require.Len(t, f.requests(), 3, "nothing sent for a usage error")
}

func TestStatsCommand(t *testing.T) {
	counts := `"deliveries":{"success":40,"failed":2,"lost":0,"deferred":3},"http429":3,"started":45,"probes":1,"holds":1,"dead":1,"heldSeconds":12.5`
	zero := `"deliveries":{"success":0,"failed":0,"lost":0,"deferred":0},"http429":0,"started":0,"probes":0,"holds":0,"dead":0,"heldSeconds":0`
	f := newFakeAPI(t, map[string]answer{
		"GET /v1/queues/emails/stats": {200, `{"queue":"emails","resolution":60,"retention":86400,"now":"2026-11-30T07:06:10.000Z",` +
			`"since":"2026-11-30T06:06:00.000Z","until":"2026-11-30T07:07:00.000Z","totals":{` + counts + `},` +
			`"buckets":[{"start":"2026-11-30T07:05:00.000Z",` + counts + `},{"start":"2026-11-30T07:06:00.000Z",` + zero + `}],` +
			`"holds":[{"from":"2026-11-30T07:05:01.000Z","until":"2026-11-30T07:05:13.500Z"}]}`},
	})
	r := runCLI(t, f, "", "stats", "emails", "--since", "2026-11-30T06:00:00Z")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, "since=2026-11-30T06%3A00%3A00Z", f.requests()[0].Query)
	require.Contains(t, r.stdout, "deliveries: 45 started, 40 succeeded, 2 failed, 0 lost, 3 deferred (3 HTTP 429)\n")
	require.Contains(t, r.stdout, "holds: 1 asked, held 12.5s; probes: 1; dead: 1\n")
	require.Contains(t, r.stdout, "2026-11-30T07:05:00.000Z  45")
	require.NotContains(t, r.stdout, "2026-11-30T07:06:00.000Z  0", "quiet minutes are left out")
	require.Contains(t, r.stdout, "hold asked: 2026-11-30T07:05:01.000Z to 2026-11-30T07:05:13.500Z\n")

	r = runCLI(t, f, "", "stats")
	require.Equal(t, ExitUsage, r.code)
}

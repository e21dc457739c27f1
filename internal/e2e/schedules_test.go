package test

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scheduleYAML is a queue for schedule tests with a short schedule lease,
// so a killed daemon's ticks are taken over within half a second.
func scheduleYAML(hookURL string) string {
	return "dispatch:\n  scheduleLease: 500ms\n" + QueueYAML("s", hookURL)
}

// tickOf reads the tick a schedule's job was published for from its
// idempotency key ("schedule:<id>:<tick ms>").
func tickOf(t *testing.T, job map[string]any) int64 {
	t.Helper()
	key, _ := job["idempotencyKey"].(string)
	i := strings.LastIndexByte(key, ':')
	require.True(t, strings.HasPrefix(key, "schedule:") && i > 0, "idempotencyKey %q", key)
	ms, err := strconv.ParseInt(key[i+1:], 10, 64)
	require.NoError(t, err)
	return ms
}

// scheduleJobs reads every job the webhook received (distinct ids) and
// returns their ticks in order, failing on a job delivered twice, a job
// without the schedule's id or two jobs for one tick.
func scheduleJobs(t *testing.T, d *Daemon, hook *Webhook, schedule string, headers ...string) []int64 {
	t.Helper()
	seen := map[string]bool{}
	ticks := map[int64]string{}
	for _, dl := range hook.Deliveries() {
		require.False(t, seen[dl.JobID], "job %s delivered twice", dl.JobID)
		seen[dl.JobID] = true
		r := d.Do("GET", "/v1/jobs/"+dl.JobID, nil, headers...)
		require.Equal(t, 200, r.Status, string(r.Body))
		job := r.JSON(t)
		require.Equal(t, schedule, job["scheduleId"], "job %s", dl.JobID)
		tick := tickOf(t, job)
		other, dup := ticks[tick]
		require.False(t, dup, "tick %d published twice: %s and %s", tick, other, dl.JobID)
		ticks[tick] = dl.JobID
	}
	out := make([]int64, 0, len(ticks))
	for tk := range ticks {
		out = append(out, tk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func createSchedule(t *testing.T, d *Daemon, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	r := d.Do("POST", "/v1/schedules", body, headers...)
	require.Equal(t, 201, r.Status, string(r.Body))
	return r.JSON(t)
}

func firedBy(d *Daemon) int { return strings.Count(d.Log(), `"schedule fired"`) }

// @every 1s on three daemons, the one firing killed mid-run: every tick
// publishes exactly one job (no tick twice, each job delivered once and
// carrying scheduleId), and the only ticks missing are those of the kill
// window, caught up as one.
func TestScheduleFleetOneKilled(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	ds := startFleet(t, 3, DaemonConfig{RedisAddr: rs.Addr, YAML: scheduleYAML(hook.URL)})
	sc := createSchedule(t, ds[0], map[string]any{"id": "tick", "queue": "s", "cron": "@every 1s", "payload": map[string]any{"k": 1}})
	require.Equal(t, "api", sc["source"])

	require.Eventually(t, func() bool { return hook.Count() >= 4 }, 10*time.Second, 20*time.Millisecond)
	// Kill the daemon that has been firing (it holds the lease).
	victim := 0
	for i, d := range ds {
		if firedBy(d) > firedBy(ds[victim]) {
			victim = i
		}
	}
	require.Positive(t, firedBy(ds[victim]))
	killedAt := time.Now()
	ds[victim].Kill()
	before := hook.Count()
	require.Eventually(t, func() bool { return hook.Count() >= before+4 }, 10*time.Second, 20*time.Millisecond)
	live := ds[(victim+1)%3]
	others := 0
	for i, d := range ds {
		if i != victim {
			others += firedBy(d)
		}
	}
	require.Positive(t, others, "another daemon took over")

	ticks := scheduleJobs(t, live, hook, "tick")
	require.GreaterOrEqual(t, len(ticks), 8)
	gaps := 0
	for i := 1; i < len(ticks); i++ {
		d := ticks[i] - ticks[i-1]
		require.Zero(t, d%1000, "ticks are whole seconds apart")
		require.LessOrEqual(t, d, int64(2000), "no gap beyond the kill window (lease 500ms): %v", ticks)
		if d > 1000 {
			gaps++
		}
	}
	require.LessOrEqual(t, gaps, 1, "only the kill window: %v", ticks)
	t.Logf("killed daemon %d at %s; ticks %v", victim, killedAt.Format(time.StampMilli), ticks)

	got := live.Do("GET", "/v1/schedules/tick", nil).JSON(t)
	require.NotNil(t, got["lastJobId"])
	require.NotNil(t, got["lastRunAt"])
}

// Every daemon down for several ticks, then one back: one catch-up job for
// the latest missed tick, then one per tick again.
func TestScheduleOutageCatchUpOnce(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	ds := startFleet(t, 2, DaemonConfig{RedisAddr: rs.Addr, YAML: scheduleYAML(hook.URL)})
	createSchedule(t, ds[0], map[string]any{"id": "beat", "queue": "s", "cron": "@every 1s", "payload": map[string]any{}})
	require.Eventually(t, func() bool { return hook.Count() >= 2 }, 10*time.Second, 20*time.Millisecond)
	for _, d := range ds {
		d.Kill()
	}
	down := time.Now()
	// Four ticks fall while no daemon runs.
	timer := time.NewTimer(4500 * time.Millisecond)
	<-timer.C
	n := hook.Count()
	ds[1].Restart()
	up := time.Now()
	require.Eventually(t, func() bool { return hook.Count() >= n+1 }, 5*time.Second, 10*time.Millisecond)
	ticks := scheduleJobs(t, ds[1], hook, "beat")
	// The first tick after the outage began is the latest one before the
	// restart: the ticks between were caught up as that one job.
	var catchUp int64
	for _, tk := range ticks {
		if tk > down.UnixMilli() {
			catchUp = tk
			break
		}
	}
	require.NotZero(t, catchUp, "%v", ticks)
	require.GreaterOrEqual(t, catchUp, down.Add(3*time.Second).UnixMilli(), "the missed ticks were not caught up as one: %v", ticks)
	require.LessOrEqual(t, catchUp, up.UnixMilli(), "%v", ticks)
	// And it goes on one per second.
	require.Eventually(t, func() bool { return hook.Count() >= n+3 }, 5*time.Second, 10*time.Millisecond)
	scheduleJobs(t, ds[1], hook, "beat")
}

// Pause stops the ticks, resume restarts them at the next tick from now
// (none caught up); validation names each bad member; file schedules are
// the file's; reach: a publisher key and a key of another tenant get the
// same 403 for an existing and a missing schedule.
func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	const admin, pub, other = "sk_admin_a", "sk_pub_a", "sk_admin_b"
	auth := "auth:\n  apiKeys: [sk_full]\n  keys:\n" +
		"    - key: " + admin + "\n      role: admin\n      queues: [\"s\"]\n" +
		"    - key: " + pub + "\n      role: publisher\n      queues: [\"s\"]\n" +
		"    - key: " + other + "\n      role: admin\n      queues: [\"t\"]\n"
	fileSched := "schedules:\n  - id: fromfile\n    queue: s\n    cron: \"0 0 1 1 *\"\n    timezone: Europe/Paris\n    payload: {Greeting: hi}\n"
	yaml := auth + scheduleYAML(hook.URL) + "  t:\n    webhookUrl: " + hook.URL + "\n    signingSecret: whsec_test\n"
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: yaml + fileSched})
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }

	// Validation: every bad member named at once.
	r := d.Do("POST", "/v1/schedules", map[string]any{"queue": "s", "cron": "61 * * * *", "timezone": "Mars/Base",
		"payload": []int{1}, "priority": 12, "id": "bad id", "flowKey": "", "extra": 1}, as("sk_full")...)
	require.Equal(t, 400, r.Status, string(r.Body))
	fe := r.JSON(t)["error"].(map[string]any)["fieldErrors"].(map[string]any)
	for _, f := range []string{"timezone", "payload", "priority", "id", "flowKey", "extra"} {
		require.Contains(t, fe, f, string(r.Body))
	}
	r = d.Do("POST", "/v1/schedules", map[string]any{"queue": "s", "cron": "61 * * * *", "payload": map[string]any{}}, as("sk_full")...)
	require.Equal(t, 400, r.Status)
	require.Contains(t, string(r.Body), `"cron"`)
	r = d.Do("POST", "/v1/schedules", map[string]any{}, as("sk_full")...)
	require.Equal(t, 400, r.Status)
	for _, f := range []string{"queue", "cron", "payload"} {
		require.Contains(t, r.JSON(t)["error"].(map[string]any)["fieldErrors"], f)
	}
	r = d.Do("POST", "/v1/schedules", map[string]any{"queue": "nope", "cron": "@every 1s", "payload": map[string]any{}}, as("sk_full")...)
	require.Equal(t, 404, r.Status)

	// The file's schedule: listed with source file, not the API's to change.
	require.Eventually(t, func() bool {
		return d.Do("GET", "/v1/schedules/fromfile", nil, as("sk_full")...).Status == 200
	}, 5*time.Second, 20*time.Millisecond)
	f := d.Do("GET", "/v1/schedules/fromfile", nil, as("sk_full")...).JSON(t)
	require.Equal(t, "file", f["source"])
	require.Equal(t, map[string]any{"Greeting": "hi"}, f["payload"])
	require.Equal(t, "2026-12-31T23:00:00.000Z", f["nextRunAt"], "midnight in Paris")
	require.Equal(t, 409, d.Do("DELETE", "/v1/schedules/fromfile", nil, as("sk_full")...).Status)
	r = d.Do("POST", "/v1/schedules", map[string]any{"id": "fromfile", "queue": "s", "cron": "@every 1s", "payload": map[string]any{}}, as("sk_full")...)
	require.Equal(t, 409, r.Status)
	require.Contains(t, string(r.Body), "managed by the config file")

	// Reach: schedules are the admin's, inside its reach.
	sc := createSchedule(t, d, map[string]any{"queue": "s", "cron": "@every 1s", "payload": map[string]any{"p": 1}, "flowKey": "fk", "priority": 2}, as(admin)...)
	id := sc["id"].(string)
	require.True(t, strings.HasPrefix(id, "sch_"), id)
	require.Equal(t, "fk", sc["flowKey"])
	require.EqualValues(t, 2, sc["priority"])
	require.Equal(t, "UTC", sc["timezone"])
	require.Nil(t, sc["lastRunAt"])
	require.Equal(t, 200, d.Do("GET", "/v1/schedules/"+id, nil, as(admin)...).Status)
	for _, key := range []string{pub, other} {
		for _, path := range []string{id, "missing"} {
			for _, req := range [][2]string{{"GET", ""}, {"DELETE", ""}, {"POST", "/pause"}, {"POST", "/resume"}} {
				r := d.Do(req[0], "/v1/schedules/"+path+req[1], nil, as(key)...)
				require.Equal(t, 403, r.Status, "%s %s%s with %s", req[0], path, req[1], key)
				require.JSONEq(t, `{"error":"forbidden"}`, string(r.Body))
			}
		}
		r := d.Do("POST", "/v1/schedules", map[string]any{"queue": "s", "cron": "@every 1s", "payload": map[string]any{}}, as(key)...)
		require.Equal(t, 403, r.Status)
		r = d.Do("GET", "/v1/schedules?queue=s", nil, as(key)...)
		require.Equal(t, 403, r.Status)
	}
	list := d.Do("GET", "/v1/schedules", nil, as(other)...).JSON(t)["schedules"].([]any)
	require.Empty(t, list, "another tenant's admin sees none")
	list = d.Do("GET", "/v1/schedules?queue=s", nil, as(admin)...).JSON(t)["schedules"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, 404, d.Do("GET", "/v1/schedules/missing", nil, as("sk_full")...).Status)

	// Pause: no job while paused; resume: ticks again, none caught up.
	require.Eventually(t, func() bool { return hook.Count() >= 1 }, 5*time.Second, 20*time.Millisecond)
	p := d.Do("POST", "/v1/schedules/"+id+"/pause", nil, as(admin)...)
	require.Equal(t, 200, p.Status, string(p.Body))
	require.Equal(t, true, p.JSON(t)["paused"])
	n := hook.Count()
	pausedAt := time.Now()
	timer := time.NewTimer(2500 * time.Millisecond)
	<-timer.C
	require.LessOrEqual(t, hook.Count(), n+1, "at most a tick already in flight while pausing")
	n = hook.Count()
	res := d.Do("POST", "/v1/schedules/"+id+"/resume", nil, as(admin)...)
	require.Equal(t, 200, res.Status)
	require.Equal(t, false, res.JSON(t)["paused"])
	next, err := time.Parse(time.RFC3339Nano, res.JSON(t)["nextRunAt"].(string))
	require.NoError(t, err)
	require.True(t, next.After(pausedAt.Add(2*time.Second)), "resumed at the next tick from now")
	require.Eventually(t, func() bool { return hook.Count() >= n+2 }, 5*time.Second, 20*time.Millisecond)
	ticks := scheduleJobs(t, d, hook, id, as("sk_full")...)
	for _, tk := range ticks {
		require.False(t, tk > pausedAt.Add(time.Second).UnixMilli() && tk < next.UnixMilli()-500, "a paused tick fired: %v", ticks)
	}

	// Delete: 204, then 404, and no more jobs.
	require.Equal(t, 204, d.Do("DELETE", "/v1/schedules/"+id, nil, as(admin)...).Status)
	require.Equal(t, 404, d.Do("GET", "/v1/schedules/"+id, nil, as("sk_full")...).Status)

	// A reload without the file schedule removes it.
	require.NoError(t, os.WriteFile(d.Config, []byte(strings.Replace(mustRead(t, d.Config), fileSched, "", 1)), 0o600))
	d.Signal(syscall.SIGHUP)
	require.Eventually(t, func() bool {
		return d.Do("GET", "/v1/schedules/fromfile", nil, as("sk_full")...).Status == 404
	}, 5*time.Second, 20*time.Millisecond)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// A schedule on a queue created over the API is deleted with the queue.
func TestScheduleDeletedWithItsQueue(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := NewWebhook(t, func(Delivery) Reply { return Reply{Status: 200} })
	d := StartDaemon(t, DaemonConfig{RedisAddr: rs.Addr, YAML: "webhooks:\n  allowPrivateNetworks: true\n"})
	r := d.Do("PUT", "/v1/queues/tenant-1", map[string]any{"webhookUrl": hook.URL, "signingSecret": "whsec_tenant_1"})
	require.Equal(t, 201, r.Status, string(r.Body))
	require.Eventually(t, func() bool {
		return d.Do("POST", "/v1/schedules", map[string]any{"id": "t1", "queue": "tenant-1", "cron": "@every 1h", "payload": map[string]any{}}).Status == 201
	}, 5*time.Second, 50*time.Millisecond)
	require.Equal(t, 200, d.Do("GET", "/v1/schedules/t1", nil).Status)
	r = d.Do("DELETE", "/v1/queues/tenant-1", nil)
	require.Equal(t, 204, r.Status, string(r.Body))
	require.Equal(t, 404, d.Do("GET", "/v1/schedules/t1", nil).Status)
	require.Empty(t, d.Do("GET", "/v1/schedules", nil).JSON(t)["schedules"])
}

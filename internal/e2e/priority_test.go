package test

// End-to-end check of job priority (control.md §2) on a real daemon and
// redis-server: the API takes priority, the Job shows it, and a paused
// backlog is delivered highest priority first, in publish order within a
// level.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPriorityDeliveryOrder(t *testing.T) {
	t.Parallel()
	rs := Redis(t)
	hook := bpNewHook(t, nil)
	d := bpStart(t, 1, rs.Addr, bpQ("prio", hook.URL, "concurrency: 1"))[0]
	r := d.Do("POST", "/v1/queues/prio/pause", map[string]any{})
	require.Equal(t, 200, r.Status, string(r.Body))

	publish := func(pri int) string {
		body := map[string]any{"payload": map[string]any{"p": pri}}
		if pri >= 0 {
			body["priority"] = pri
		}
		r := d.Do("POST", "/v1/queues/prio/jobs", body)
		require.Equal(t, 201, r.Status, string(r.Body))
		return r.JSON(t)["id"].(string)
	}
	none := publish(-1) // no priority member: 0
	lowA := publish(0)
	high := publish(9)
	midA := publish(4)
	lowB := publish(0)
	midB := publish(4)
	require.EqualValues(t, 9, d.Job(high)["priority"])
	require.EqualValues(t, 0, d.Job(none)["priority"])

	bad := d.Do("POST", "/v1/queues/prio/jobs", map[string]any{"payload": map[string]any{}, "priority": 10})
	require.Equal(t, 400, bad.Status, string(bad.Body))
	require.Contains(t, string(bad.Body), `"priority"`)

	r = d.Do("POST", "/v1/queues/prio/resume", map[string]any{})
	require.Equal(t, 200, r.Status, string(r.Body))
	want := []string{high, midA, midB, none, lowA, lowB}
	require.Eventually(t, func() bool { return len(hook.Started()) == len(want) }, 10*time.Second, 5*time.Millisecond, "every job delivered")
	var got []string
	for _, dl := range hook.Started() {
		got = append(got, dl.JobID)
	}
	require.Equal(t, want, got, "highest priority first, publish order within a level")
}

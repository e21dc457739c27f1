package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

const scheduleQueues = `
queues:
  reports:
    webhookUrl: http://127.0.0.1:9000/r
    signingSecret: whsec_x
`

func TestFileSchedules(t *testing.T) {
	t.Parallel()
	c, err := load(t, scheduleQueues+`
schedules:
  - id: nightly
    queue: reports
    cron: "30 2 * * *"
    timezone: America/New_York
    payload: {Kind: Nightly, n: 12345678901234567890, list: [1, 2.5, true, null], nested: {B: 1, a: "x"}}
    priority: 3
    flowKey: tenant-a
  - id: pulse
    queue: reports
    cron: "@every 10s"
    payload: {}
`, nil)
	require.NoError(t, err)
	require.Len(t, c.Schedules, 2)
	s := c.Schedules[0]
	require.Equal(t, "nightly", s.ID)
	require.Equal(t, "America/New_York", s.Timezone)
	require.Equal(t, `{"Kind":"Nightly","n":12345678901234567890,"list":[1,2.5,true,null],"nested":{"B":1,"a":"x"}}`, string(s.Payload),
		"keys keep their case and order, numbers their digits")
	require.Equal(t, 3, s.Priority)
	require.Equal(t, "tenant-a", *s.FlowKey)
	require.Equal(t, "UTC", c.Schedules[1].Timezone)
	require.Equal(t, `{}`, string(c.Schedules[1].Payload))
}

// Every problem at once, each naming its key.
func TestFileSchedulesInvalid(t *testing.T) {
	t.Parallel()
	_, err := load(t, scheduleQueues+`
schedules:
  - id: a
    queue: nope
    cron: "61 * * * *"
    payload: {}
  - id: a
    queue: reports
    cron: "* * * * *"
    timezone: Mars/Base
    payload: [1]
    priorty: 2
  - queue: reports
    cron: "@every 10ms"
    payload: {}
    priority: 12
`, nil)
	var ce *Error
	require.True(t, errors.As(err, &ce), "%v", err)
	msg := err.Error()
	for _, want := range []string{
		`schedules[0].queue: "nope" is not a queue`,
		`schedules[0].cron: is not a valid cron expression`,
		`schedules[1].id: "a" is also the id of schedules[0]`,
		`schedules[1].timezone: is not a known IANA time zone`,
		`schedules[1].payload: must be a mapping`,
		`schedules[1].priorty: unknown key (did you mean "priority"?)`,
		`schedules[2].id: is required`,
		`schedules[2].priority: must be an integer from 0 to 9`,
		`schedules[2].cron: @every must be a whole number of seconds`,
	} {
		require.Contains(t, msg, want)
	}
}

package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The webhooks section defaults to "any public address", reads from the
// file and the environment, and shows in Redacted.
func TestWebhooksSection(t *testing.T) {
	t.Parallel()
	c, err := Load("", nil)
	require.NoError(t, err)
	require.Equal(t, Webhooks{}, c.Webhooks)
	p, err := c.Webhooks.Policy()
	require.NoError(t, err)
	require.Error(t, p.CheckURL("http://127.0.0.1/"), "the default refuses loopback")

	c, err = load(t, "webhooks:\n  allowedHosts: [hooks.example.com, \"*.customers.example\", 10.1.0.0/16]\n  allowPrivateNetworks: true\n", nil)
	require.NoError(t, err)
	require.Equal(t, Webhooks{AllowedHosts: []string{"hooks.example.com", "*.customers.example", "10.1.0.0/16"}, AllowPrivateNetworks: true}, c.Webhooks)
	out := c.Redacted()
	require.Contains(t, out, "webhooks:\n  allowedHosts:\n    - hooks.example.com\n")
	require.Contains(t, out, "allowPrivateNetworks: true")

	c, err = load(t, "", map[string]string{"SIMPLEQ_WEBHOOKS_ALLOWEDHOSTS": "a.example.com, 203.0.113.0/24",
		"SIMPLEQ_WEBHOOKS_ALLOWPRIVATENETWORKS": "true"})
	require.NoError(t, err)
	require.Equal(t, Webhooks{AllowedHosts: []string{"a.example.com", "203.0.113.0/24"}, AllowPrivateNetworks: true}, c.Webhooks)

	// File queues are trusted: loopback is fine, and they are not Checked.
	c, err = load(t, "queues:\n  local:\n    webhookUrl: http://127.0.0.1:9000/hook\n    signingSecret: s\n", nil)
	require.NoError(t, err)
	require.False(t, c.Queues["local"].Checked)
}

// A bad entry is named by its index, with what it must be.
func TestWebhooksValidation(t *testing.T) {
	t.Parallel()
	got := problems(t, "webhooks:\n  allowedHosts: [ok.example.com, \"*.ok.example\", 10.0.0.1/8, \"\", \"foo.*.example\", 0x7f.0.0.1]\n  allowPrivateNetworks: maybe\n", nil)
	requireProblem(t, got, "webhooks.allowedHosts[2]", "did you mean 10.0.0.0/8", `"10.0.0.1/8"`)
	requireProblem(t, got, "webhooks.allowedHosts[3]", "must not be empty")
	requireProblem(t, got, "webhooks.allowedHosts[4]", "host name")
	requireProblem(t, got, "webhooks.allowedHosts[5]", "canonical dotted quad")
	requireProblem(t, got, "webhooks.allowPrivateNetworks", "true or false")
	for _, p := range got {
		require.False(t, strings.HasPrefix(p, "webhooks.allowedHosts[0]") || strings.HasPrefix(p, "webhooks.allowedHosts[1]"), p)
	}
}

package cli

import "github.com/simpleq/simpleqd/client"

// The API's answers as the CLI reads them (api.md). Jobs and queues decode
// into the Go SDK's types, which already read the wire format; only the
// envelopes around them are declared here. --json prints the raw bytes.

type publishedJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
	// Replaced: the replace key's never-delivered job took the payload.
	Replaced bool `json:"replaced"`
}

type queuesJSON struct {
	Queues []client.Queue `json:"queues"`
}

type deadPageJSON struct {
	Jobs       []client.Job `json:"jobs"`
	NextCursor *string      `json:"nextCursor"`
}

type replayedJSON struct {
	Replayed int `json:"replayed"`
}

package cli

import "encoding/json"

// The API's answers as the CLI reads them (api.md). Only what the tables
// show is decoded; --json prints the raw bytes instead.

type publishedJSON struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
}

type attemptJSON struct {
	Attempt           int      `json:"attempt"`
	Status            string   `json:"status"`
	Error             *string  `json:"error"`
	WebhookStatusCode *int     `json:"webhookStatusCode"`
	Timestamp         string   `json:"timestamp"`
	Probe             bool     `json:"probe"`
	RetryAfter        *float64 `json:"retryAfter"`
	Scope             string   `json:"scope"`
	Reason            *string  `json:"reason"`
}

type jobJSON struct {
	ID             string          `json:"id"`
	Queue          string          `json:"queue"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	DeferCount     int             `json:"deferCount"`
	IdempotencyKey *string         `json:"idempotencyKey"`
	Payload        json.RawMessage `json:"payload"`
	ScheduledFor   string          `json:"scheduledFor"`
	ExpiresAt      string          `json:"expiresAt"`
	LastError      *string         `json:"lastError"`
	DeadReason     *string         `json:"deadReason"`
	History        []attemptJSON   `json:"history"`
	CreatedAt      string          `json:"createdAt"`
	CompletedAt    *string         `json:"completedAt"`
}

type queueJSON struct {
	Name            string  `json:"name"`
	Mode            string  `json:"mode"`
	WebhookURL      string  `json:"webhookUrl"`
	Concurrency     int     `json:"concurrency"`
	RateLimitMax    int     `json:"rateLimitMax"`
	RateLimitWindow float64 `json:"rateLimitWindow"`
	MaxAttempts     int     `json:"maxAttempts"`
	MaxDefers       int     `json:"maxDefers"`
	Counts          struct {
		Pending     int64 `json:"pending"`
		Processing  int64 `json:"processing"`
		AwaitingAck int64 `json:"awaitingAck"`
		Dead        int64 `json:"dead"`
	} `json:"counts"`
	Hold struct {
		State      string  `json:"state"`
		Until      *string `json:"until"`
		ProbeJobID *string `json:"probeJobId"`
		Reason     *string `json:"reason"`
	} `json:"hold"`
}

type queuesJSON struct {
	Queues []queueJSON `json:"queues"`
}

type deadPageJSON struct {
	Jobs       []jobJSON `json:"jobs"`
	NextCursor *string   `json:"nextCursor"`
}

type replayedJSON struct {
	Replayed int `json:"replayed"`
}

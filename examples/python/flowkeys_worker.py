#!/usr/bin/env python3
"""Standard-mode simpleqd worker for a queue with flow keys, Python 3.11
standard library only (docs/flow-keys.md).

Each job is published with its tenant as flowKey; the delivery carries it in
the x-simpleq-flow-key header, and the worker calls the provider with that
tenant's own API key. When the provider rate-limits one tenant (429/503/529),
the worker relays the status and wait as its own answer with Retry-After.
With flowKeys.holdScope key, simpleqd holds that tenant's lane only: the
other tenants keep delivering, and the held tenant reopens after one
successful probe. No attempt is spent on the way.

Environment:
  SIGNING_SECRET  the queue's signingSecret; several, comma-separated, while rotating
  LISTEN          host:port to listen on (default 127.0.0.1:9000); webhook path /webhook
  PROVIDER_URL    the downstream to call; empty starts a built-in fake that 429s 3 calls
  TENANT_KEYS     each tenant's provider API key: "acme=sk_acme,globex=sk_globex"; a job
                  whose tenant has none fails (500)
  DEFAULT_KEY     the provider key for jobs published without a flowKey (empty: refuse them)

Queue config: mode: standard, webhookUrl: http://<LISTEN>/webhook,
flowKeys: {holdScope: key} (the default).
"""

import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The signature check, the provider-wait parsing and the fake provider are
# standard_worker.py's (beside this file).
import standard_worker as std

TENANT_KEYS = dict(kv.split("=", 1) for kv in os.environ.get("TENANT_KEYS", "").split(",") if "=" in kv)
DEFAULT_KEY = os.environ.get("DEFAULT_KEY", "")
PROVIDER_URL = os.environ.get("PROVIDER_URL", "")


def log(msg: str) -> None:
    print(f"[flowkeys_worker] {msg}", flush=True)


def call_provider(payload, api_key: str) -> tuple[int, dict, bytes]:
    """POST the payload with the tenant's key. No retries here: the
    provider's 429 must reach us so we can relay it."""
    req = urllib.request.Request(PROVIDER_URL, data=json.dumps(payload).encode(), method="POST",
                                 headers={"content-type": "application/json", "authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


class Webhook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (http.server's naming)
        if self.path != "/webhook":
            return self.answer(404)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        why = std.verify_delivery(raw, self.headers)
        if why:
            log(f"refused a delivery: {why}")
            return self.answer(401)
        job = json.loads(raw)
        tenant = self.headers.get("x-simpleq-flow-key")  # None: published without a flowKey
        api_key = TENANT_KEYS.get(tenant) if tenant is not None else DEFAULT_KEY
        if not api_key:
            log(f"job {job['id']}: no provider key for tenant {tenant!r}")
            return self.answer(500)
        try:
            status, headers, body = call_provider(job["payload"], api_key)
        except OSError as err:
            log(f"job {job['id']} (tenant {tenant!r}): provider unreachable: {err}")
            return self.answer(500)
        if status in std.BACKPRESSURE:
            wait = std.parse_retry_after(headers, body)
            wait = std.FALLBACK_WAIT if wait is None else wait
            # This tenant's key is limited: 429 + Retry-After holds its lane only.
            log(f"job {job['id']} (tenant {tenant!r}): provider {status}, relaying Retry-After {wait}s")
            return self.answer(status, {"retry-after": std.format_retry_after(wait)})
        if status >= 300:
            log(f"job {job['id']} (tenant {tenant!r}): provider {status}")
            return self.answer(500)
        log(f"job {job['id']} (tenant {tenant!r}): done")
        return self.answer(200)

    def answer(self, status: int, headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, fmt, *args):  # quiet per-request logs
        pass


def main() -> None:
    global PROVIDER_URL
    if not std.SECRETS:
        sys.exit("SIGNING_SECRET is required")
    if not PROVIDER_URL:
        PROVIDER_URL = std.start_fake_provider()
        log(f"PROVIDER_URL not set: using a fake provider at {PROVIDER_URL}")
    host, port = std.LISTEN.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Webhook)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log(f"flow keys worker listening on http://{std.LISTEN}/webhook ({len(TENANT_KEYS)} tenant keys)")
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ack-mode simpleqd (SimpleQ) worker, Python 3.11 standard library only.

The webhook verifies the delivery and answers 200 at once ("received"), then
does the work in a background thread and reports the outcome with a callback:

  ack    the work succeeded
  defer  the provider was rate-limited (429/503/529): the queue waits the
         provider's Retry-After and the job is redelivered, no attempt spent
  nack   a failure; retryable unless the provider refused the input (4xx)

If this process dies mid-job the work is lost, but the queue's ackTimeout
(with ackTimeoutAction: retry) redelivers it.

Environment:
  SIMPLEQ_URL      the daemon's API (default http://127.0.0.1:8080)
  SIMPLEQ_API_KEY  a key from the daemon's auth.apiKeys (empty: none)
  SIGNING_SECRET   the queue's signingSecret; several, comma-separated, while rotating
  ALLOW_UNTIMESTAMPED  1 accepts deliveries signed with x-simpleq-signature only
                   (SimpleQ's hosted service), giving up replay protection for them
  LISTEN           host:port to listen on (default 127.0.0.1:9000); webhook path /webhook
  PROVIDER_URL     the downstream to call; empty starts a built-in fake that 429s 3 calls

Queue config: mode: ack, webhookUrl: http://<LISTEN>/webhook.
"""

import email.utils
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import simpleq_verify  # beside this file

SECRETS = [s for s in os.environ.get("SIGNING_SECRET", "").split(",") if s]
ALLOW_UNTIMESTAMPED = os.environ.get("ALLOW_UNTIMESTAMPED") == "1"
TOLERANCE = 5 * 60  # seconds a webhook-timestamp may be from this clock, either way
LISTEN = os.environ.get("LISTEN", "127.0.0.1:9000")
PROVIDER_URL = os.environ.get("PROVIDER_URL", "")
SIMPLEQ_URL = os.environ.get("SIMPLEQ_URL", "http://127.0.0.1:8080").rstrip("/")
SIMPLEQ_API_KEY = os.environ.get("SIMPLEQ_API_KEY", "")
FALLBACK_WAIT = 10.0  # seconds, when the provider gives no usable wait (e.g. a 529)
BACKPRESSURE = (429, 503, 529)


def log(msg: str) -> None:
    print(f"[ack_worker] {msg}", flush=True)


def verify_delivery(raw: bytes, headers) -> str | None:
    """None when the delivery is authentic and fresh, otherwise why not
    (simpleq_verify.verify_delivery, with this worker's settings)."""
    return simpleq_verify.verify_delivery(raw, headers, SECRETS, TOLERANCE, ALLOW_UNTIMESTAMPED)


def parse_retry_after(headers, body: bytes) -> float | None:
    """The provider's wait in seconds: retry-after-ms (OpenAI), Retry-After
    (seconds or HTTP-date), or a Gemini RetryInfo retryDelay ("7s") in the
    JSON body. None when there is none."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms)
            if v >= 0:
                return v / 1000
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra:
        try:
            v = float(ra)
            if v >= 0:
                return v
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(ra)
                return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
            except (TypeError, ValueError):
                pass
    try:
        return _find_retry_delay(json.loads(body))
    except (ValueError, UnicodeDecodeError):
        return None


def _find_retry_delay(node) -> float | None:
    if isinstance(node, dict):
        delay = node.get("retryDelay")
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                v = float(delay[:-1])
                if v >= 0:
                    return v
            except ValueError:
                pass
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _find_retry_delay(child)
        if found is not None:
            return found
    return None


def api(method: str, path: str, body: dict | None = None, retries: int = 3):
    """Call the simpleqd API. Retries network errors, 429 and 5xx with
    exponential backoff and jitter, honouring Retry-After; 4xx is returned
    as is (the request itself is wrong, or the job moved on: 409)."""
    data = None if body is None else json.dumps(body).encode()
    for attempt in range(retries + 1):
        req = urllib.request.Request(f"{SIMPLEQ_URL}{path}", data=data, method=method)
        req.add_header("content-type", "application/json")
        if SIMPLEQ_API_KEY:
            req.add_header("authorization", f"Bearer {SIMPLEQ_API_KEY}")
        wait = None
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            payload = err.read()
            if err.code != 429 and err.code < 500:
                return err.code, json.loads(payload or b"null")
            wait = parse_retry_after({k.lower(): v for k, v in err.headers.items()}, b"")
            if attempt == retries:
                return err.code, json.loads(payload or b"null")
        except OSError:
            if attempt == retries:
                raise
        if wait is None:
            base = 0.2 * 2 ** attempt
            wait = base / 2 + random.random() * base / 2
        time.sleep(wait)
    raise AssertionError("unreachable")


def callback(job: dict, kind: str, body: dict) -> None:
    """POST /v1/jobs/:id/ack|nack|defer, naming the attempt so a late report
    from a delivery that was since redelivered is refused (409), not applied."""
    body = {**body, "attempt": job["attempt"]}
    status, answer = api("POST", f"/v1/jobs/{job['id']}/{kind}", body)
    if status == 409:
        log(f"job {job['id']} attempt {job['attempt']}: {kind} refused, the job has moved on: {answer}")
    elif status != 200:
        log(f"job {job['id']} attempt {job['attempt']}: {kind} failed: {status} {answer}")
    else:
        log(f"job {job['id']} attempt {job['attempt']}: {kind}")


def call_provider(payload) -> tuple[int, dict, bytes]:
    """POST the job's payload to the provider. Returns status, headers, body.
    No retries here: the provider's 429 must reach us so we can defer."""
    req = urllib.request.Request(PROVIDER_URL, data=json.dumps(payload).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def process_job(job: dict) -> None:
    try:
        try:
            status, headers, body = call_provider(job["payload"])
        except OSError as err:  # connection refused, timeout
            return callback(job, "nack", {"retryable": True, "reason": f"provider unreachable: {err}"})
        if status in BACKPRESSURE:
            wait = parse_retry_after(headers, body)
            wait = FALLBACK_WAIT if wait is None else wait
            return callback(job, "defer", {"retryAfter": wait, "reason": f"provider {status}"})
        if 400 <= status < 500:
            return callback(job, "nack", {"retryable": False, "reason": f"provider {status}"})
        if status >= 300:
            return callback(job, "nack", {"retryable": True, "reason": f"provider {status}"})
        return callback(job, "ack", {})
    except Exception as err:  # noqa: BLE001 - never let a worker thread die silently
        log(f"job {job.get('id')}: could not report: {err!r}; ackTimeout will redeliver it")


class Webhook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (http.server's naming)
        if self.path != "/webhook":
            return self.answer(404)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        why = verify_delivery(raw, self.headers)
        if why:
            log(f"refused a delivery: {why}")
            return self.answer(401)
        job = json.loads(raw)
        self.answer(200)  # received; the outcome follows as a callback
        threading.Thread(target=process_job, args=(job,), daemon=True).start()

    def answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, fmt, *args):  # quiet per-request logs
        pass


def check_queues() -> None:
    """Start-up diagnostic: warn about queues that deliver here in standard
    mode (they would complete jobs on the 200, before the work is done)."""
    try:
        status, answer = api("GET", "/v1/queues", retries=0)
    except OSError as err:
        log(f"could not list queues (is SIMPLEQ_URL right?): {err}")
        return
    if status != 200:
        log(f"could not list queues: {status} {answer}")
        return
    for q in answer["queues"]:
        if f"{LISTEN}/webhook" in q["webhookUrl"]:
            if q["mode"] != "ack":
                log(f"WARNING: queue {q['name']!r} delivers here in {q['mode']} mode; this worker is for ack mode")
            else:
                log(f"serving queue {q['name']!r} (ack mode, concurrency {q['concurrency']})")


def start_fake_provider(limited: int = 3) -> str:
    """A stand-in provider that answers 429 + Retry-After: 1 to its first
    `limited` calls, so the example shows backpressure on its own."""
    calls = {"n": 0}
    lock = threading.Lock()

    class Provider(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                calls["n"] += 1
                n = calls["n"]
            body = b'{"error":"rate limited"}' if n <= limited else b'{"ok":true}'
            self.send_response(429 if n <= limited else 200)
            if n <= limited:
                self.send_header("retry-after", "1")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/v1/messages"


def main() -> None:
    global PROVIDER_URL
    if not SECRETS:
        sys.exit("SIGNING_SECRET is required")
    if not PROVIDER_URL:
        PROVIDER_URL = start_fake_provider()
        log(f"PROVIDER_URL not set: using a fake provider at {PROVIDER_URL}")
    check_queues()
    host, port = LISTEN.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Webhook)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log(f"ack-mode worker listening on http://{LISTEN}/webhook")
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()

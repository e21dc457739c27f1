"""Signature checks for simpleqd deliveries, shared by the example workers.

Kept in one file beside the workers so both verify exactly the same way; a
worker copied elsewhere takes this file along (the standard library only).
"""

import base64
import hashlib
import hmac
import re
import time


def verify_delivery(raw: bytes, headers, secrets: list[str], tolerance: float, allow_untimestamped: bool) -> str | None:
    """None when the delivery is authentic and fresh, otherwise why not.

    Verify over the raw bytes BEFORE parsing, in constant time, against every
    accepted secret (two while rotating). simpleqd signs two ways:
    webhook-signature (Standard Webhooks: an HMAC of "id.timestamp.body" under
    every active secret) and x-simpleq-signature (SimpleQ's: an HMAC of the
    body under the current secret only). The first also proves when the
    delivery was made, so a captured one cannot be replayed later: it is
    required, and decides alone (a receiver still holding only the old secret
    matches it during a rotation). x-simpleq-signature alone is accepted only
    with ALLOW_UNTIMESTAMPED=1 (SimpleQ's hosted service sends nothing else)."""
    std = headers.get("webhook-signature")
    if std:
        return verify_standard(raw, headers.get("webhook-id"), headers.get("webhook-timestamp"), std, secrets, tolerance)
    if not allow_untimestamped:
        return "no webhook-signature (x-simpleq-signature alone could be a replay)"
    if not verify_simpleq(raw, headers.get("x-simpleq-signature"), secrets):
        return "x-simpleq-signature does not match"
    return None


def standard_key(secret: str) -> bytes:
    """The HMAC key a secret stands for in webhook-signature, as simpleqd reads
    it: "whsec_" + padded standard base64 is the decoded bytes (the Standard
    Webhooks form); any other secret is its own bytes, whole."""
    rest = secret[len("whsec_"):] if secret.startswith("whsec_") else ""
    if rest and re.fullmatch(r"[A-Za-z0-9+/=]+", rest):
        try:
            key = base64.b64decode(rest, validate=True)
            if key:
                return key
        except ValueError:
            pass
    return secret.encode()


def verify_standard(raw: bytes, msg_id: str | None, timestamp: str | None, signature: str,
                    secrets: list[str], tolerance: float) -> str | None:
    if not msg_id or not timestamp or not re.fullmatch(r"[0-9]+", timestamp):
        return "webhook-id and webhook-timestamp (Unix seconds) are required"
    signed = f"{msg_id}.{timestamp}.".encode() + raw
    wants = [hmac.new(standard_key(s), signed, hashlib.sha256).digest() for s in secrets]
    ok = False
    for entry in signature.split():
        version, _, sig = entry.partition(",")
        if version != "v1":
            continue  # another scheme (v1a): not ours to check
        try:
            got = base64.b64decode(sig, validate=True)
        except ValueError:
            continue
        for want in wants:
            ok = hmac.compare_digest(want, got) or ok
    if not ok:
        return "webhook-signature does not match"
    # Checked after the signature, so this means a genuine but stale delivery.
    if abs(time.time() - int(timestamp)) > tolerance:
        return f"webhook-timestamp more than {tolerance}s from this clock (a replay, or a clock that is off)"
    return None


def verify_simpleq(raw: bytes, header: str | None, secrets: list[str]) -> bool:
    """x-simpleq-signature is sha256=<hex HMAC-SHA256 of the raw body>, keyed
    with the secret's bytes as they are."""
    if not header or not header.lower().startswith("sha256="):
        return False
    got = header[len("sha256="):].strip().lower()
    ok = False
    for secret in secrets:
        want = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
        ok = hmac.compare_digest(want, got) or ok
    return ok

// Signature checks for simpleqd deliveries, shared by the example workers, so
// both verify exactly the same way; a worker copied elsewhere takes this file
// along (Node's standard library only).

import { createHmac, timingSafeEqual } from 'node:crypto';

// Verify over the raw bytes BEFORE parsing, in constant time, against every
// accepted secret (two while rotating). Returns undefined when the delivery is
// authentic and fresh, otherwise why not. simpleqd signs two ways:
// webhook-signature (Standard Webhooks: an HMAC of "id.timestamp.body" under
// every active secret) and x-simpleq-signature (SimpleQ's: an HMAC of the body
// under the current secret only). The first also proves when the delivery was
// made, so a captured one cannot be replayed later: it is required, and decides
// alone (a receiver still holding only the old secret matches it during a
// rotation). x-simpleq-signature alone is accepted only with
// ALLOW_UNTIMESTAMPED=1 (SimpleQ's hosted service sends nothing else).
export function verifyDelivery(raw, headers, { secrets, tolerance, allowUntimestamped }) {
  const std = headers['webhook-signature'];
  if (std) return verifyStandard(raw, headers['webhook-id'], headers['webhook-timestamp'], std, secrets, tolerance);
  if (!allowUntimestamped) return 'no webhook-signature (x-simpleq-signature alone could be a replay)';
  if (!verifySignature(raw, headers['x-simpleq-signature'], secrets)) return 'x-simpleq-signature does not match';
  return undefined;
}

// The HMAC key a secret stands for in webhook-signature, as simpleqd reads it:
// "whsec_" + padded standard base64 is the decoded bytes (the Standard Webhooks
// form); any other secret is its own bytes, whole.
function standardKey(secret) {
  const rest = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : '';
  // Buffer.from(…, 'base64') never throws, so check the form first.
  if (/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(rest) && rest !== '') {
    return Buffer.from(rest, 'base64');
  }
  return Buffer.from(secret, 'utf8');
}

function verifyStandard(raw, id, timestamp, signature, secrets, tolerance) {
  if (!id || !timestamp || !/^[0-9]+$/.test(timestamp)) {
    return 'webhook-id and webhook-timestamp (Unix seconds) are required';
  }
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), raw]);
  const wants = secrets.map((s) => createHmac('sha256', standardKey(s)).update(signed).digest());
  let ok = false;
  for (const entry of signature.split(' ')) {
    const [version, sig] = entry.split(',');
    if (version !== 'v1' || !sig) continue; // another scheme (v1a): not ours to check
    const got = Buffer.from(sig, 'base64');
    for (const want of wants) ok = (got.length === want.length && timingSafeEqual(got, want)) || ok;
  }
  if (!ok) return 'webhook-signature does not match';
  // Checked after the signature, so this means a genuine but stale delivery.
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > tolerance) {
    return `webhook-timestamp more than ${tolerance}s from this clock (a replay, or a clock that is off)`;
  }
  return undefined;
}

// x-simpleq-signature is sha256=<hex HMAC-SHA256 of the raw body>, keyed with
// the secret's bytes as they are.
function verifySignature(raw, header, secrets) {
  if (typeof header !== 'string' || !header.toLowerCase().startsWith('sha256=')) return false;
  const got = Buffer.from(header.slice('sha256='.length).trim().toLowerCase());
  let ok = false;
  for (const secret of secrets) {
    const want = Buffer.from(createHmac('sha256', secret).update(raw).digest('hex'));
    ok = (want.length === got.length && timingSafeEqual(want, got)) || ok;
  }
  return ok;
}

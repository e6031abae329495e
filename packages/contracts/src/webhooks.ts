import { createHmac } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import net from 'node:net';

// The webhook delivery contract shared by the API (which publishes it in the catalog and
// validates subscription URLs) and the worker (which signs, sends and re-checks targets).

export const webhookHeaders = {
  signature: 'X-Service-Signature',
  timestamp: 'X-Service-Webhook-Timestamp',
  id: 'X-Service-Webhook-Id',
  attempt: 'X-Service-Webhook-Attempt',
} as const;

/** The event type of the test event a subscription can be sent on demand. */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

/** The X-Service-Signature value: `sha256=` + hex HMAC-SHA256 of the raw body bytes. */
export function signWebhookBody(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The delay before attempt n+1 after attempt n failed; the last value repeats. */
export function backoffAfterAttempt(backoffSeconds: readonly number[], attempt: number): number {
  if (backoffSeconds.length === 0) return 0;
  return backoffSeconds[Math.min(Math.max(attempt, 1), backoffSeconds.length) - 1]!;
}

// Targets a webhook may not reach unless the deployment allows private targets: the
// network itself, loopback, link-local (cloud metadata), private, carrier-grade NAT,
// multicast and reserved ranges.
const blocked = new net.BlockList();
for (const [subnet, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(subnet, prefix, 'ipv4');
}
for (const [subnet, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(subnet, prefix, 'ipv6');
}

/** The IPv4 address embedded in an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::) IPv6 address. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1]!;
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (!hex) return null;
  const high = parseInt(hex[1]!, 16);
  const low = parseInt(hex[2]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** True for an IP address a webhook may not target without the private-targets flag. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(address);
    if (v4 !== null) return blocked.check(v4, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return false;
}

export type WebhookUrlProblem = { reason: 'invalid' | 'private' | 'unresolvable'; message: string };

/** The URL's host without IPv6 brackets. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Checks a subscription URL: http(s), no embedded credentials, and — unless private
 * targets are allowed — a host that resolves only to public addresses. Returns null
 * when the URL is acceptable.
 */
export async function checkWebhookUrl(
  value: string,
  options: { allowPrivateTargets: boolean; lookupTimeoutMs?: number },
): Promise<WebhookUrlProblem | null> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { reason: 'invalid', message: 'must be an absolute http:// or https:// URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { reason: 'invalid', message: 'must use http or https' };
  }
  if (url.username !== '' || url.password !== '') {
    return {
      reason: 'invalid',
      message: 'must not carry credentials; deliveries are authenticated by the signing secret',
    };
  }
  if (url.hash !== '') return { reason: 'invalid', message: 'must not have a #fragment' };
  if (options.allowPrivateTargets) return null;

  const host = hostOf(url);
  let addresses: string[];
  if (net.isIP(host) !== 0) {
    addresses = [host];
  } else {
    try {
      const resolved = await withTimeout(lookup(host, { all: true, verbatim: true }), options.lookupTimeoutMs ?? 5000);
      addresses = resolved.map((entry) => entry.address);
    } catch {
      return { reason: 'unresolvable', message: `host ${host} does not resolve` };
    }
  }
  const refused = addresses.find(isPrivateAddress);
  if (refused !== undefined) {
    return {
      reason: 'private',
      message: `host ${host} is a private, loopback or link-local address (${refused}); such targets are not allowed`,
    };
  }
  return null;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { backoffAfterAttempt, checkWebhookUrl, isPrivateAddress, signWebhookBody } from './webhooks.ts';

describe('isPrivateAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd12:3456::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    '64:ff9b::10.0.0.1',
  ])('refuses %s', (address) => {
    expect(isPrivateAddress(address)).toBe(true);
  });

  it.each(['93.184.215.14', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8'])(
    'allows public %s',
    (address) => {
      expect(isPrivateAddress(address)).toBe(false);
    },
  );
});

describe('checkWebhookUrl', () => {
  it('normalises numeric host spellings before judging them', async () => {
    for (const url of ['http://0x7f000001/', 'http://2130706433/', 'http://017700000001/', 'http://127.1/']) {
      expect(await checkWebhookUrl(url, { allowPrivateTargets: false }), url).toMatchObject({ reason: 'private' });
    }
  });

  it('lets private targets through only when the deployment allows them, but never other schemes', async () => {
    expect(await checkWebhookUrl('http://127.0.0.1:8080/x', { allowPrivateTargets: true })).toBeNull();
    expect(await checkWebhookUrl('file:///etc/passwd', { allowPrivateTargets: true })).toMatchObject({
      reason: 'invalid',
    });
  });
});

describe('signing and backoff', () => {
  it('signs the raw bytes as sha256=<hex HMAC-SHA256>', () => {
    const body = '{"event":"report.created","data":{"name":"Zoë"}}';
    expect(signWebhookBody('whsec_test', body)).toBe(
      `sha256=${createHmac('sha256', 'whsec_test').update(Buffer.from(body, 'utf8')).digest('hex')}`,
    );
  });

  it('waits backoffSeconds[n-1] after attempt n, repeating the last value', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffAfterAttempt([15, 60], attempt))).toEqual([15, 60, 60, 60]);
  });
});

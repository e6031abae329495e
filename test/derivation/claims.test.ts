import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction, markDirtySql } from '@gantry/db';
import {
  claimDirtyDevices,
  releaseClaims,
  settleClaims,
  type DeviceOutput,
} from '../../services/worker/src/features/derivation/repository.ts';
import { createDerivationFixture, markDirty, type DerivationFixture } from './helpers.ts';

// The derivation queue's contract: a worker claims devices with session advisory locks,
// so ingest marking a device being derived never waits for the derivation, and what it
// marks meanwhile is derived next instead of being lost.

const HOUR = 3_600_000;

describe('derivation claims', () => {
  let fixture: DerivationFixture;

  beforeAll(async () => {
    fixture = await createDerivationFixture('claims', 'postgres', 3);
  });
  afterAll(async () => fixture?.drop());

  const queueRow = async (deviceUuid: string) =>
    (await fixture.pool.query(`SELECT dirty_from, new_from FROM derivation_queue WHERE device_id = $1`, [deviceUuid]))
      .rows[0] as { dirty_from: Date | number; new_from: Date | number } | undefined;
  const done = (deviceId: string, tenantId: string) =>
    ({ deviceId, tenantId, continueFrom: null }) as unknown as DeviceOutput;

  it('lets ingest mark a device while a worker derives it, and queues what was marked meanwhile', async () => {
    const [device, other] = fixture.devices;
    const t0 = Date.parse('2026-03-02T08:00:00Z');
    await markDirty(fixture, device!, t0);
    await markDirty(fixture, other!, t0);

    const worker = await fixture.pool.connect();
    const rival = await fixture.pool.connect();
    const ingest = await fixture.pool.connect();
    try {
      const claimed = await claimDirtyDevices(worker, 10);
      expect(claimed.map((entry) => entry.deviceId).sort()).toEqual([device!.id, other!.id].sort());
      expect(claimed.find((entry) => entry.deviceId === device!.id)!.dirtyFrom).toBe(t0);

      // Another worker finds nothing to claim while these are held.
      expect(await claimDirtyDevices(rival, 10)).toEqual([]);
      await releaseClaims(rival);

      await inTransaction(worker, async (transaction) => {
        // Ingest stores a later reading of the device being derived: no wait (a lock wait
        // would hit the statement timeout).
        await ingest.query(`SET statement_timeout = 2000`);
        await inTransaction(ingest, (client) =>
          client.query(markDirtySql, [[device!.id], [fixture.tenantId], [new Date(t0 + HOUR)]]),
        );
        expect(await queueRow(device!.id)).toMatchObject({ dirty_from: new Date(t0), new_from: new Date(t0 + HOUR) });
        await settleClaims(transaction, [done(device!.id, fixture.tenantId), done(other!.id, fixture.tenantId)]);
      });
      await releaseClaims(worker);
    } finally {
      worker.release();
      rival.release();
      ingest.release();
    }

    // The device marked meanwhile stays queued from that mark; the other one is done.
    expect(await queueRow(device!.id)).toMatchObject({ dirty_from: new Date(t0 + HOUR), new_from: Infinity });
    expect(await queueRow(other!.id)).toBeUndefined();
  });

  it('a rolled-back derivation leaves every mark in place, and the claim is free again', async () => {
    const device = fixture.devices[2]!;
    const t0 = Date.parse('2026-03-03T08:00:00Z');
    await markDirty(fixture, device, t0);
    const worker = await fixture.pool.connect();
    try {
      const claimed = await claimDirtyDevices(worker, 10);
      expect(claimed.map((entry) => entry.deviceId)).toContain(device.id);
      await fixture.pool.query(markDirtySql, [[device.id], [fixture.tenantId], [new Date(t0 - HOUR)]]);
      await expect(
        inTransaction(worker, async (transaction) => {
          await settleClaims(transaction, [done(device.id, fixture.tenantId)]);
          throw new Error('derivation failed');
        }),
      ).rejects.toThrow('derivation failed');
      await releaseClaims(worker);
    } finally {
      worker.release();
    }
    // Both marks still count: the earliest is where derivation starts next.
    expect(await queueRow(device.id)).toMatchObject({ dirty_from: new Date(t0 - HOUR) });
    const again = await fixture.pool.connect();
    try {
      expect((await claimDirtyDevices(again, 10)).map((entry) => entry.deviceId)).toContain(device.id);
      await releaseClaims(again);
    } finally {
      again.release();
    }
  });
});

import mqtt from 'mqtt';
import { deviceTopic } from '@gantry/contracts';
import type { ApiGet } from './console.ts';
import { waitFor } from './ingest.ts';

// A tenant of thousands of machines, made as an operator would: one import file through
// the admin API (POST /tenants/{id}/import), then one GPS fix per machine through the
// broker into ingest, and some bad data: machines never heard from, machines sending
// rejected messages, machines with poor GPS. The console's large-fleet test and
// `pnpm bench:console` both use it.

/** Where the machines work: four terminals, a quarter of the fleet each. */
const TERMINALS = [
  { name: 'Rotterdam', latitude: 51.9542, longitude: 4.0529 },
  { name: 'Antwerp', latitude: 51.2806, longitude: 4.3384 },
  { name: 'Hamburg', latitude: 53.5328, longitude: 9.9395 },
  { name: 'Singapore', latitude: 1.2644, longitude: 103.8224 },
];
const TYPES = ['Straddle carrier', 'Reach stacker', 'Terminal tractor', 'Forklift'];
const CUSTOMERS = 10;

export type Behaviour = 'ok' | 'never_heard' | 'errors' | 'poor_gps';

export interface LargeFleetMachine {
  index: number;
  identifier: string;
  name: string;
  deviceId: string;
  customerName: string;
  behaviour: Behaviour;
  /** Its one valid fix (none for a machine never heard from). */
  latitude: number | null;
  longitude: number | null;
}

export interface LargeFleet {
  tenantId: string;
  tenantKey: string;
  /** A key of the first customer (Customer 0). */
  customerKey: string;
  machines: LargeFleetMachine[];
  /** How many machines behave how. */
  counts: Record<Behaviour, number>;
}

/** A fraction in [0, 1) from an integer: positions spread evenly, the same in every run. */
function spread(index: number, salt: number): number {
  const x = Math.sin(index * 12.9898 + salt * 78.233) * 43758.5453;
  return x - Math.floor(x);
}

/**
 * The machines of a fleet of `size`: 2.5 % never heard from (offline), 1.2 % sending a
 * rejected message for each fix (errors), 0.8 % sending ten fixes without a valid one
 * for each valid one (poor GPS), the rest one valid fix each, within about a kilometre of
 * their terminal.
 */
export function largeFleetMachines(size: number, prefix: string): LargeFleetMachine[] {
  return Array.from({ length: size }, (_, index) => {
    const code = String(index + 1).padStart(5, '0');
    const behaviour: Behaviour =
      index % 40 === 7 ? 'never_heard' : index % 80 === 13 ? 'errors' : index % 125 === 21 ? 'poor_gps' : 'ok';
    const terminal = TERMINALS[index % TERMINALS.length]!;
    return {
      index,
      identifier: `LF-${code}`,
      name: `Machine ${code}`,
      deviceId: `${prefix}-${code}`,
      customerName: `Customer ${index % CUSTOMERS}`,
      behaviour,
      latitude: behaviour === 'never_heard' ? null : terminal.latitude + (spread(index, 1) - 0.5) * 0.02,
      longitude: behaviour === 'never_heard' ? null : terminal.longitude + (spread(index, 2) - 0.5) * 0.03,
    };
  });
}

export function largeFleetCsv(machines: LargeFleetMachine[]): string {
  const lines = ['identifier,name,assetType,customerName,displayCode,deviceId,deviceName'];
  for (const machine of machines)
    lines.push(
      [
        machine.identifier,
        machine.name,
        TYPES[machine.index % TYPES.length],
        machine.customerName,
        machine.identifier,
        machine.deviceId,
        `${machine.name} tracker`,
      ].join(','),
    );
  return `${lines.join('\n')}\n`;
}

/** fetch against the admin API (path relative to /api/admin/v1), with the admin token. */
export type AdminFetch = (
  path: string,
  init: { method: string; headers?: Record<string, string>; body: string },
) => Promise<Response>;

async function adminJson<T>(admin: AdminFetch, path: string, body: unknown): Promise<T> {
  const response = await admin(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

/** The tenant, its keys and every machine with its device, from one CSV file through the admin API. */
export async function provisionLargeFleet(
  admin: AdminFetch,
  size: number,
  prefix: string,
  tenantName = 'Large fleet terminal group',
): Promise<LargeFleet> {
  const tenant = await adminJson<{ id: string }>(admin, '/tenants', { name: tenantName });
  const tenantKey = await adminJson<{ key: string }>(admin, `/tenants/${tenant.id}/api-keys`, { name: 'console' });
  const customerKey = await adminJson<{ key: string }>(admin, `/tenants/${tenant.id}/api-keys`, {
    name: 'customer 0',
    customerName: 'Customer 0',
  });
  const machines = largeFleetMachines(size, prefix);
  const imported = await admin(`/tenants/${tenant.id}/import`, {
    method: 'POST',
    headers: { 'Content-Type': 'text/csv' },
    body: largeFleetCsv(machines),
  });
  if (!imported.ok) throw new Error(`the import answered ${imported.status}: ${(await imported.text()).slice(0, 500)}`);
  const counts: Record<Behaviour, number> = { ok: 0, never_heard: 0, errors: 0, poor_gps: 0 };
  for (const machine of machines) counts[machine.behaviour] += 1;
  return { tenantId: tenant.id, tenantKey: tenantKey.key, customerKey: customerKey.key, machines, counts };
}

/** The messages a machine publishes: its bad data first, its one valid fix last (the position it keeps). */
function messagesOf(machine: LargeFleetMachine, now: number): Array<{ topic: string; payload: string }> {
  if (machine.latitude === null || machine.longitude === null) return [];
  const gps = (secondsAgo: number, extra: Record<string, unknown>) => ({
    topic: deviceTopic(machine.deviceId, 'gps'),
    payload: JSON.stringify({
      ts: new Date(now - secondsAgo * 1000).toISOString(),
      lat: machine.latitude,
      lon: machine.longitude,
      fix: true,
      hdop: 0.9,
      satellites: 10,
      speedKmh: 0,
      ...extra,
    }),
  });
  const valid = gps(0, {});
  if (machine.behaviour === 'errors') return [gps(1, { lat: 999 }), valid];
  if (machine.behaviour === 'poor_gps')
    return [...Array.from({ length: 10 }, (_, index) => gps(index + 1, { hdop: 9 })), valid];
  return [valid];
}

/** Publishes every machine's messages (QoS 1, a few thousand in flight) and resolves once the broker has them all. */
export async function publishLargeFleet(mqttUrl: string, machines: LargeFleetMachine[]): Promise<number> {
  const client = await mqtt.connectAsync(mqttUrl, { clientId: `large-fleet-${Date.now().toString(36)}`, clean: true });
  const now = Date.now();
  const messages = machines.flatMap((machine) => messagesOf(machine, now));
  try {
    const inFlight = 2000;
    for (let start = 0; start < messages.length; start += inFlight)
      await Promise.all(
        messages
          .slice(start, start + inFlight)
          .map((message) => client.publishAsync(message.topic, message.payload, { qos: 1 })),
      );
  } finally {
    await client.endAsync();
  }
  return messages.length;
}

/** New fixes for `machines`, each a few metres from its last: what a poll of the map then sees move. */
export async function nudgeLargeFleet(mqttUrl: string, machines: LargeFleetMachine[], step: number): Promise<void> {
  const moved = machines
    .filter((machine) => machine.latitude !== null)
    .map((machine) => ({
      ...machine,
      behaviour: 'ok' as const,
      latitude: machine.latitude! + 0.00005 * Math.sin(step + machine.index),
      longitude: machine.longitude! + 0.00008 * Math.cos(step + machine.index),
    }));
  await publishLargeFleet(mqttUrl, moved);
}

/**
 * Resolves once ingest has every fix and every bad message of the fleet: the map counts
 * every machine heard from and data quality every machine with errors or poor GPS. `get`
 * reads the external API with the fleet's tenant key. A hang guard, not a timing.
 */
export async function waitForLargeFleet(get: ApiGet, fleet: LargeFleet, timeoutMs: number): Promise<void> {
  const positioned = fleet.machines.length - fleet.counts.never_heard;
  await waitFor(
    async () => ({
      map: (await get('/telemetry/devices/clusters?zoom=0')).total as number,
      quality: (await get('/telemetry/data-quality?limit=1')).summary,
    }),
    ({ map, quality }) =>
      map === positioned &&
      quality.errorAssets === fleet.counts.errors &&
      quality.poorGpsAssets === fleet.counts.poor_gps,
    timeoutMs,
    'the fleet’s messages in ingest',
    1000,
  );
}

import { isValidGpsFix, type Reading } from '@gantry/contracts';
import type { Cell } from './encode.ts';
import { stateColumns, stateGroups, type DeviceRecord, type StateGroup } from './tables.ts';

type GroupKey = StateGroup['ts'];

interface GroupValue {
  ts: number;
  cells: Cell[];
  valid?: boolean;
}

/** The newest values per field group of one device within a batch. */
export interface DeviceStateDelta {
  device: DeviceRecord;
  firstSeenAt: number;
  lastSeenAt: number;
  groups: Map<GroupKey, GroupValue>;
}

export function newStateDelta(device: DeviceRecord, receivedAt: number): DeviceStateDelta {
  return { device, firstSeenAt: receivedAt, lastSeenAt: receivedAt, groups: new Map() };
}

export function noteReceived(delta: DeviceStateDelta, receivedAt: number): void {
  if (receivedAt < delta.firstSeenAt) delta.firstSeenAt = receivedAt;
  if (receivedAt > delta.lastSeenAt) delta.lastSeenAt = receivedAt;
}

function offer(delta: DeviceStateDelta, key: GroupKey, ts: number, cells: Cell[]): void {
  const current = delta.groups.get(key);
  if (!current || ts > current.ts) delta.groups.set(key, { ts, cells });
}

/** Same preference as the SQL upsert: a valid fix beats an invalid one, then the newest. */
function offerPosition(delta: DeviceStateDelta, ts: number, valid: boolean, cells: Cell[]): void {
  const current = delta.groups.get('position_ts');
  if (!current || (valid && !current.valid) || (valid === current.valid && ts > current.ts)) {
    delta.groups.set('position_ts', { ts, cells, valid });
  }
}

export function noteReading(delta: DeviceStateDelta, reading: Reading): void {
  const ts = reading.ts;
  offer(delta, 'last_message_at', ts, [reading.type]);
  if (reading.ignition !== undefined) offer(delta, 'ignition_ts', ts, [reading.ignition]);
  switch (reading.type) {
    case 'gps': {
      const valid = isValidGpsFix(reading);
      offerPosition(delta, ts, valid, [reading.lat, reading.lon, reading.speedKmh, reading.heading, valid]);
      break;
    }
    case 'adcin':
      offer(delta, 'adc_ts', ts, [reading.state === 'on', reading.raw]);
      break;
    case 'hourmeter':
      offer(delta, 'hourmeter_ts', ts, [reading.value]);
      break;
    case 'identifier':
      offer(delta, 'identifier_ts', ts, [reading.identifier, reading.event]);
      break;
    case 'heartbeat':
      offer(delta, 'heartbeat_ts', ts, [reading.batteryV, reading.rssi, reading.firmware, reading.uptimeS]);
      break;
    case 'imu':
      offer(delta, 'imu_ts', ts, [reading.peakG]);
      break;
  }
}

/** The delta as a row in stateColumns order. */
export function toStateRow(delta: DeviceStateDelta): Cell[] {
  const row: Cell[] = [
    delta.device.id,
    delta.device.tenantId,
    delta.device.assetId,
    delta.firstSeenAt,
    delta.lastSeenAt,
  ];
  for (const group of stateGroups) {
    const value = delta.groups.get(group.ts);
    row.push(value ? value.ts : null);
    for (let index = 0; index < group.columns.length; index += 1) row.push(value ? value.cells[index] : null);
  }
  if (row.length !== stateColumns.length) throw new Error('device_state row does not match its columns');
  return row;
}

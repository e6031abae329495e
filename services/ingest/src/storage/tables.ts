import { isValidGpsFix, type Reading } from '@gantry/contracts';
import type { Cell, Column } from './encode.ts';

/** Silver `telemetry_readings`, in insert order. */
export const silverColumns: readonly Column[] = [
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'type', kind: 'text' },
  { name: 'ts', kind: 'timestamptz' },
  { name: 'received_at', kind: 'timestamptz' },
  { name: 'ignition', kind: 'bool' },
  { name: 'latitude', kind: 'float8' },
  { name: 'longitude', kind: 'float8' },
  { name: 'speed_kmh', kind: 'float4' },
  { name: 'heading', kind: 'float4' },
  { name: 'hdop', kind: 'float4' },
  { name: 'satellites', kind: 'int2' },
  { name: 'fix', kind: 'bool' },
  { name: 'altitude_m', kind: 'float4' },
  { name: 'gps_valid', kind: 'bool' },
  { name: 'adc_on', kind: 'bool' },
  { name: 'adc_raw', kind: 'float4' },
  { name: 'hourmeter', kind: 'int8' },
  { name: 'peak_g', kind: 'float4' },
  { name: 'imu_samples', kind: 'int4' },
  { name: 'imu_window_ms', kind: 'int4' },
  { name: 'identifier', kind: 'text' },
  { name: 'identifier_event', kind: 'text' },
  { name: 'battery_v', kind: 'float4' },
  { name: 'rssi', kind: 'float4' },
  { name: 'firmware', kind: 'text' },
  { name: 'uptime_s', kind: 'int8' },
];

const silverIndex = (name: string) => silverColumns.findIndex((column) => column.name === name);

/** Where the cells that the batch's counters and positions read sit in a silver row (toSilverRow). */
export const silverCell = {
  tenant: silverIndex('tenant_id'),
  device: silverIndex('device_id'),
  asset: silverIndex('asset_id'),
  type: silverIndex('type'),
  ts: silverIndex('ts'),
  latitude: silverIndex('latitude'),
  longitude: silverIndex('longitude'),
  gpsValid: silverIndex('gps_valid'),
};

export interface DeviceRecord {
  id: string;
  tenantId: string;
  assetId: string | null;
  enabled: boolean;
}

/** One silver row for a reading of a known device (cells in silverColumns order). */
export function toSilverRow(device: DeviceRecord, reading: Reading, receivedAt: number): Cell[] {
  const row: Cell[] = new Array(silverColumns.length).fill(null);
  row[0] = device.tenantId;
  row[1] = device.id;
  row[2] = device.assetId;
  row[3] = reading.type;
  row[4] = reading.ts;
  row[5] = receivedAt;
  row[6] = reading.ignition;
  switch (reading.type) {
    case 'gps':
      row[7] = reading.lat;
      row[8] = reading.lon;
      row[9] = reading.speedKmh;
      row[10] = reading.heading;
      row[11] = reading.hdop;
      row[12] = reading.satellites;
      row[13] = reading.fix;
      row[14] = reading.altitudeM;
      row[15] = isValidGpsFix(reading);
      break;
    case 'adcin':
      row[16] = reading.state === 'on';
      row[17] = reading.raw;
      break;
    case 'hourmeter':
      row[18] = reading.value;
      break;
    case 'imu':
      row[19] = reading.peakG;
      row[20] = reading.samples;
      row[21] = reading.windowMs;
      break;
    case 'identifier':
      row[22] = reading.identifier;
      row[23] = reading.event;
      break;
    case 'heartbeat':
      row[24] = reading.batteryV;
      row[25] = reading.rssi;
      row[26] = reading.firmware;
      row[27] = reading.uptimeS;
      break;
  }
  return row;
}

/**
 * `device_state` field groups. Within a group the newest device time wins; the position
 * prefers a valid fix over an invalid one, then the newest.
 */
export const stateGroups = [
  { ts: 'last_message_at', columns: [{ name: 'last_message_type', kind: 'text' }] },
  {
    ts: 'position_ts',
    columns: [
      { name: 'latitude', kind: 'float8' },
      { name: 'longitude', kind: 'float8' },
      { name: 'speed_kmh', kind: 'float4' },
      { name: 'heading', kind: 'float4' },
      { name: 'gps_valid', kind: 'bool' },
    ],
  },
  {
    ts: 'adc_ts',
    columns: [
      { name: 'adc_on', kind: 'bool' },
      { name: 'adc_raw', kind: 'float4' },
    ],
  },
  { ts: 'hourmeter_ts', columns: [{ name: 'hourmeter', kind: 'int8' }] },
  {
    ts: 'identifier_ts',
    columns: [
      { name: 'identifier', kind: 'text' },
      { name: 'identifier_event', kind: 'text' },
    ],
  },
  { ts: 'ignition_ts', columns: [{ name: 'ignition', kind: 'bool' }] },
  {
    ts: 'heartbeat_ts',
    columns: [
      { name: 'battery_v', kind: 'float4' },
      { name: 'rssi', kind: 'float4' },
      { name: 'firmware', kind: 'text' },
      { name: 'uptime_s', kind: 'int8' },
    ],
  },
  { ts: 'imu_ts', columns: [{ name: 'imu_peak_g', kind: 'float4' }] },
] as const satisfies ReadonlyArray<{ ts: string; columns: readonly Column[] }>;

export type StateGroup = (typeof stateGroups)[number];

export const stateColumns: readonly Column[] = [
  { name: 'device_id', kind: 'uuid' },
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'first_seen_at', kind: 'timestamptz' },
  { name: 'last_seen_at', kind: 'timestamptz' },
  ...stateGroups.flatMap((group): Column[] => [{ name: group.ts, kind: 'timestamptz' }, ...group.columns]),
];

function newerWins(group: StateGroup): string {
  const ts = group.ts;
  if (ts === 'position_ts') {
    return `excluded.position_ts IS NOT NULL AND (s.position_ts IS NULL
      OR (excluded.gps_valid AND NOT coalesce(s.gps_valid, false))
      OR (excluded.gps_valid = coalesce(s.gps_valid, false) AND excluded.position_ts > s.position_ts))`;
  }
  return `excluded.${ts} IS NOT NULL AND (s.${ts} IS NULL OR excluded.${ts} > s.${ts})`;
}

/** The ON CONFLICT assignments of the device_state upsert. */
export function stateAssignments(): string {
  const assignments = [
    'tenant_id = excluded.tenant_id',
    'asset_id = excluded.asset_id',
    'first_seen_at = least(s.first_seen_at, excluded.first_seen_at)',
    'last_seen_at = greatest(s.last_seen_at, excluded.last_seen_at)',
    'updated_at = now()',
  ];
  for (const group of stateGroups) {
    const condition = newerWins(group);
    for (const name of [group.ts, ...group.columns.map((column) => column.name)]) {
      assignments.push(`${name} = CASE WHEN ${condition} THEN excluded.${name} ELSE s.${name} END`);
    }
  }
  return assignments.join(',\n    ');
}

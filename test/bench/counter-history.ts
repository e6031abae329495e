import { readingTypes } from '@gantry/contracts';
import type { Pool } from '@gantry/db';

/**
 * Earlier hours of a tenant's traffic as ingest would have counted them, written straight
 * into device_counts_hourly: per device and hour, 60 messages (one reading each) of each
 * reading type, 57 valid GPS fixes. A benchmark of data quality needs them so that the
 * default range (the last 24 hours) reads as many counter rows as a fleet that has been
 * running all day, without publishing a day of traffic first.
 */
export async function countHistory(pool: Pool, tenantId: string, openHour: number, hours = 23): Promise<void> {
  const perType = readingTypes.flatMap((type) => [`${type}_messages`, `${type}_readings`]);
  await pool.query(
    `INSERT INTO device_counts_hourly (tenant_id, device_id, asset_id, bucket, ${perType.join(', ')},
                                       readings_added, payload_bytes, timed_messages, valid_gps_fixes)
     SELECT $1, d.id, d.asset_id, $2::timestamptz - h * interval '1 hour', ${perType.map(() => '60').join(', ')},
            ${60 * readingTypes.length}, ${3600 * readingTypes.length}, ${60 * readingTypes.length}, 57
       FROM devices d, generate_series(1, $3::int) h WHERE d.tenant_id = $1`,
    [tenantId, new Date(openHour), hours],
  );
}

import type { Config } from '@gantry/config';
import { maintainPartitions, type Pool, type StorageMode } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import type { WorkerLoop } from '../../loop.ts';

/**
 * Deletes what has outlived its purpose: expired Idempotency-Key records (in slices, to
 * keep transactions short), and in PostgreSQL mode keeps silver's and bronze's day
 * partitions (packages/db/src/partitions.ts): days ahead created, rows of the default
 * partition moved to a day of their own, days past retention detached and dropped whole.
 * TimescaleDB drops whole chunks with its own retention policies.
 */
export function housekeepingLoop(deps: {
  pool: Pool;
  config: Config;
  storageMode: StorageMode;
  logger: Logger;
}): WorkerLoop {
  return {
    name: 'housekeeping',
    idleMs: 60_000,
    async runOnce() {
      const expired = await deps.pool.query(
        `/* worker:expireIdempotencyKeys */
         DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT 5000)`,
      );
      let partitionWork = 0;
      if (deps.storageMode === 'postgres') {
        const client = await deps.pool.connect();
        try {
          const report = await maintainPartitions(client, { retention: deps.config.retention });
          if (report.created.length + report.dropped.length + report.skipped.length > 0 || report.expiredInDefault > 0)
            deps.logger.info(report, 'partitions maintained');
          // Skipped steps wait for the next idle pass rather than retrying at once.
          partitionWork = report.created.length + report.dropped.length + report.expiredInDefault;
        } finally {
          client.release();
        }
      }
      return (expired.rowCount ?? 0) + partitionWork;
    },
  };
}

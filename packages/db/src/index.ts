export {
  beginInSnapshot,
  createPool,
  inTransaction,
  withTransaction,
  isConnectionError,
  isDatabaseUnavailable,
  type Pool,
  type PoolClient,
  type Queryable,
} from './pool.ts';
export { migrateDatabase, type MigrateOptions, type MigrateResult } from './migrate.ts';
export { maintainPartitions, partitionName } from './partitions.ts';
export {
  checkTimescaleAvailability,
  recordedStorageMode,
  resolveStorageMode,
  storageModeOf,
  StorageModeError,
  type StorageMode,
  type RequestedStorageMode,
} from './storage-mode.ts';
export {
  goldRelations,
  goldRelation,
  goldDefinition,
  liveDefinition,
  installGoldRelations,
  type GoldRelation,
} from './gold.ts';
export {
  readGoldCoverage,
  readUtilization,
  utilizationStatement,
  utilizationFigures,
  SUM_COLUMNS as UTILIZATION_SUM_COLUMNS,
  type GoldCoverage,
  type UtilizationBucket,
  type UtilizationQuery,
  type UtilizationResult,
  type UtilizationRow,
  type UtilizationSums,
  type UtilizationStatement,
} from './gold-read.ts';
export {
  findRunningEmbeddedPostgres,
  startEmbeddedPostgres,
  type EmbeddedPostgresHandle,
} from './embedded-postgres.ts';
export { choosePort, isPortInUse, type PortRequest } from './ports.ts';
export { readDatabaseStatus, type DatabaseStatus } from './status.ts';
export { dbDirectory } from './paths.ts';
export { createOutbox, type Outbox, type OutboxEvent } from './outbox.ts';
export { openDatabase, onShutdown, type OpenDatabase } from './bootstrap.ts';
export { markDirtySql } from './derivation-queue.ts';
export {
  addToCounterWindow,
  advanceCounterWindow,
  COUNTER_WINDOW_HOURS,
  counterWindowColumns,
  counterWindowDrift,
  holdCounterWindow,
  inCounterWindow,
  lockCounterWindow,
  rebuildCounterWindow,
  type CounterWindowDelta,
} from './counter-window.ts';
export { dataAsOfSql } from './data-as-of.ts';

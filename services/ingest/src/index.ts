export { startIngest, ingestClientId, type IngestDeps, type RunningIngest } from './ingest.ts';
export { replayBronze, type ReplayOptions, type ReplaySummary } from './replay.ts';
export { parseMessage, type ParsedMessage, type RawMessage } from './pipeline/steps.ts';
export type { RejectionReason } from './pipeline/result.ts';
export { DEVICE_ID_PATTERN } from '@gantry/contracts';
export { ingestMetrics } from './metrics.ts';
/** The prom-client global registry ingest's metrics live in. */
export { register as metricsRegistry } from 'prom-client';

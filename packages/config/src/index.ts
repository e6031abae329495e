import { z } from 'zod';

const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((value) => value === 'true' || value === '1' || value === 'yes');

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const nonNegativeInt = z.coerce.number().int().min(0);
const positiveNumber = z.coerce.number().positive();

const secondsList = z
  .string()
  .regex(/^\d+(,\d+)*$/, 'a comma-separated list of whole seconds, e.g. 15,60')
  .transform((value) => value.split(',').map(Number));

const postgresUrl = z.string().regex(/^postgres(ql)?:\/\//, 'a postgres:// or postgresql:// URL');

const mqttUrl = z.string().regex(/^(mqtts?|wss?|tcp):\/\//, 'an mqtt://, mqtts://, ws:// or wss:// URL');

/**
 * Every environment variable Gantry reads, in one place. Names are the variables
 * themselves so a validation error names exactly what to fix.
 */
export const environmentSchema = z.object({
  GANTRY_DATABASE_URL: postgresUrl.optional(),
  GANTRY_DATABASE_READ_URL: postgresUrl.optional(),
  GANTRY_READ_MAX_LAG_SECONDS: positiveNumber.default(10),
  GANTRY_READ_LAG_CHECK_MS: positiveInt.default(2000),
  GANTRY_MQTT_URL: mqttUrl.optional(),
  GANTRY_MQTT_PORT: port.default(1883),
  GANTRY_MQTT_USERNAME: z.string().optional(),
  GANTRY_MQTT_PASSWORD: z.string().optional(),
  GANTRY_INGEST_SOURCE: z.enum(['mqtt', 'nats']).default('mqtt'),
  GANTRY_NATS_URLS: z
    .string()
    .regex(/^(nats:\/\/)?[^\s,]+(,(nats:\/\/)?[^\s,]+)*$/, 'a comma-separated list of nats:// URLs')
    .optional(),
  GANTRY_NATS_REPLICAS: positiveInt.default(3),
  GANTRY_HOST: z.string().min(1).default('0.0.0.0'),
  GANTRY_PORT: port.default(8080),
  GANTRY_PUBLIC_URL: z.url().optional(),
  GANTRY_ADMIN_TOKEN: z.string().min(16, 'at least 16 characters').optional(),
  GANTRY_DATA_DIR: z.string().min(1).default('./.gantry'),
  GANTRY_STORAGE_MODE: z.enum(['auto', 'timescaledb', 'postgres']).default('auto'),
  GANTRY_EMBEDDED_PG_PORT: port.default(54329),
  GANTRY_FILE_STORAGE: z.enum(['auto', 'database', 'disk']).default('auto'),
  GANTRY_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  GANTRY_LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  GANTRY_DB_POOL_SIZE: positiveInt.default(10),

  GANTRY_INGEST_BATCH_SIZE: positiveInt.default(2000),
  GANTRY_INGEST_BATCH_MS: positiveInt.default(1000),
  GANTRY_INGEST_SHARED_GROUP: z
    .string()
    .regex(/^[A-Za-z0-9_-]*$/)
    .default('gantry-ingest'),
  GANTRY_INGEST_CLIENT_ID: z.string().min(1).max(64).optional(),
  GANTRY_INGEST_MAX_PAYLOAD_BYTES: positiveInt.default(65536),
  GANTRY_INGEST_MAX_FUTURE_SECONDS: nonNegativeInt.default(300),
  GANTRY_INGEST_MAX_IN_FLIGHT: positiveInt.default(10000),
  GANTRY_INGEST_MAX_IN_FLIGHT_BYTES: positiveInt.default(4 * 1024 * 1024),
  GANTRY_INGEST_SESSION_EXPIRY_SECONDS: positiveInt.default(86400),
  GANTRY_INGEST_WRITERS: positiveInt.default(2),
  GANTRY_INGEST_WRITE_METHOD: z.enum(['unnest', 'copy']).default('copy'),
  GANTRY_INGEST_STATEMENT_TIMEOUT_MS: positiveInt.default(30000),
  GANTRY_INGEST_DRAIN_TIMEOUT_MS: positiveInt.default(15000),
  GANTRY_INGEST_METRICS_PORT: port.default(9464),
  GANTRY_INGEST_HEAP_GROWTH_PERCENT: nonNegativeInt.default(100),

  GANTRY_BRONZE_RETENTION_DAYS: positiveInt.default(14),
  GANTRY_READING_RETENTION_DAYS: positiveInt.default(400),

  GANTRY_WORKER_POLL_MS: positiveInt.default(500),
  GANTRY_WORKER_METRICS_PORT: port.default(9465),
  GANTRY_WORKER_DEVICE_BATCH: positiveInt.default(200),
  GANTRY_WORKER_DERIVATION_LOOPS: positiveInt.default(2),
  GANTRY_GOLD_REFRESH_MS: positiveInt.default(5000),
  GANTRY_DERIVATION_MAX_READINGS: positiveInt.default(100000),
  GANTRY_DERIVATION_CARRY_LAG_SECONDS: nonNegativeInt.default(60),
  GANTRY_DERIVATION_GAP_SECONDS: positiveInt.default(600),
  GANTRY_DERIVATION_MOVING_SPEED_MPS: positiveNumber.default(0.5),
  GANTRY_DERIVATION_MOVING_DISTANCE_M: positiveNumber.default(5),
  GANTRY_DERIVATION_STOP_SECONDS: positiveInt.default(120),
  GANTRY_DERIVATION_IMU_ANOMALY_G: positiveNumber.default(2.5),
  GANTRY_DERIVATION_IDENTIFIER_TIMEOUT_SECONDS: positiveInt.default(1800),
  GANTRY_GEOFENCE_ALERT_MAX_AGE_SECONDS: positiveInt.default(900),
  GANTRY_DEVICE_ONLINE_SECONDS: positiveInt.default(600),
  GANTRY_DEVICE_SILENT_SECONDS: positiveInt.default(86400),
  GANTRY_QUALITY_MAX_ERROR_PERCENT: positiveNumber.default(5),
  GANTRY_QUALITY_MIN_GPS_OK_PERCENT: positiveNumber.default(80),
  GANTRY_QUALITY_MIN_GPS_FIXES: positiveInt.default(10),

  GANTRY_WEBHOOK_MAX_ATTEMPTS: positiveInt.default(3),
  GANTRY_WEBHOOK_BACKOFF_SECONDS: secondsList.default([15, 60]),
  GANTRY_WEBHOOK_TIMEOUT_SECONDS: positiveInt.default(10),
  GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS: booleanFlag.default(false),
  GANTRY_WEBHOOK_CONCURRENCY: positiveInt.default(16),
  GANTRY_WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: positiveInt.default(4),

  GANTRY_RATE_LIMIT_PER_SECOND: positiveNumber.default(20),
  GANTRY_RATE_LIMIT_BURST: positiveInt.default(40),
  GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: positiveInt.default(30),
  GANTRY_REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'a redis:// URL')
    .optional(),

  GANTRY_MAX_JSON_BYTES: positiveInt.default(1024 * 1024),
  GANTRY_MAX_UPLOAD_BYTES: positiveInt.default(25 * 1024 * 1024),
  GANTRY_REQUEST_TIMEOUT_MS: positiveInt.default(30000),
  GANTRY_API_STATEMENT_TIMEOUT_MS: positiveInt.default(30000),

  GANTRY_RUN_MIGRATIONS: booleanFlag.default(true),
  GANTRY_DEMO: booleanFlag.default(true),
  GANTRY_DEMO_SIMULATOR: booleanFlag.default(true),

  GANTRY_CONSOLE_TILE_URL: z
    .string()
    .regex(/^https?:\/\/[^/\s]+\/\S*\{z\}\S*\{x\}\S*\{y\}/, 'an http(s) tile URL template with {z}, {x} and {y}')
    .optional(),
  GANTRY_CONSOLE_TILE_ATTRIBUTION: z.string().max(300).optional(),
});

export type Environment = z.infer<typeof environmentSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export interface Config {
  databaseUrl: string | undefined;
  /**
   * A streaming replica (or a port balancing replicas) for the API's read-only routes;
   * they read the primary while it lags more than maxLagSeconds or does not answer.
   */
  readReplica: { url: string | undefined; maxLagSeconds: number; lagCheckMs: number };
  dataDir: string;
  storageMode: 'auto' | 'timescaledb' | 'postgres';
  embeddedPostgresPort: number;
  /**
   * Where uploaded files live (GANTRY_FILE_STORAGE, `auto` resolved): the database
   * whenever GANTRY_DATABASE_URL is set, so every API instance sees every file; the
   * data directory's disk for the embedded default.
   */
  fileStorage: 'database' | 'disk';
  /**
   * The listeners' ports the environment set (GANTRY_PORT, GANTRY_MQTT_PORT,
   * GANTRY_EMBEDDED_PG_PORT). `gantry start` moves a default port that is taken to the
   * next free one, but never a port that was asked for.
   */
  fixedPorts: { http: boolean; mqtt: boolean; embeddedPostgres: boolean };
  runMigrations: boolean;
  dbPoolSize: number;
  mqtt: {
    url: string | undefined;
    embeddedPort: number;
    username: string | undefined;
    password: string | undefined;
  };
  /** The clustered path (docs/ingest.md, "Clustered brokers"): ingest reads a JetStream consumer instead of MQTT. */
  nats: {
    urls: string[];
    /** Replicas of the durable consumer (and of the MQTT messages stream, should ingest have to create it). */
    replicas: number;
  };
  http: {
    host: string;
    port: number;
    publicUrl: string | undefined;
    adminToken: string | undefined;
    maxJsonBytes: number;
    maxUploadBytes: number;
    requestTimeoutMs: number;
    /** statement_timeout of the API's pool (exports lift it for their streaming COPY). */
    statementTimeoutMs: number;
  };
  log: { level: Environment['GANTRY_LOG_LEVEL']; format: 'json' | 'pretty' };
  ingest: {
    batchSize: number;
    batchMs: number;
    /** Where ingest reads device messages: one MQTT broker, or a NATS cluster's JetStream. */
    source: 'mqtt' | 'nats';
    sharedGroup: string;
    clientId: string | undefined;
    maxPayloadBytes: number;
    maxFutureSeconds: number;
    maxInFlight: number;
    maxInFlightBytes: number;
    sessionExpirySeconds: number;
    writers: number;
    writeMethod: 'unnest' | 'copy';
    statementTimeoutMs: number;
    drainTimeoutMs: number;
    metricsPort: number;
    /** V8's --heap-growing-percent for the standalone ingest process (0: V8's own). */
    heapGrowthPercent: number;
  };
  retention: { bronzeDays: number; readingDays: number };
  worker: { pollMs: number; metricsPort: number; deviceBatch: number; derivationLoops: number; goldRefreshMs: number };
  derivation: {
    /** Readings per run across the claimed devices (a backlog is derived in slices). */
    maxReadings: number;
    /** The stored carry lags the newest reading by this much, so slightly late readings cost nothing. */
    carryLagSeconds: number;
    gapSeconds: number;
    movingMinSpeedMps: number;
    movingMinDistanceM: number;
    stopMinSeconds: number;
    imuAnomalyG: number;
    identifierTimeoutSeconds: number;
    /** Geofence transitions older than this (device time vs now) change state but open no alert. */
    geofenceAlertMaxAgeSeconds: number;
  };
  /** Statuses the telemetry API derives (docs/telemetry-api.md). */
  telemetryStatus: {
    /** A device is online when its last message arrived at most this long ago… */
    onlineSeconds: number;
    /** …silent up to this long, offline beyond. */
    silentSeconds: number;
    /** Data quality `errors`: more than this share of messages rejected (percent). */
    maxErrorRatePercent: number;
    /** Data quality `poor_gps`: less than this share of valid fixes (percent)… */
    minGpsOkPercent: number;
    /** …judged from this many fixes on. */
    minGpsFixes: number;
  };
  webhooks: {
    maxAttempts: number;
    backoffSeconds: number[];
    timeoutSeconds: number;
    allowPrivateTargets: boolean;
    concurrency: number;
    /** In-flight deliveries one subscription may hold, so a slow receiver cannot take every slot. */
    concurrencyPerSubscription: number;
  };
  rateLimit: { perSecond: number; burst: number; exportsPerMinute: number; redisUrl: string | undefined };
  demo: { enabled: boolean; simulator: boolean };
  /** The browser console (/console): an optional base map of tiles; none by default (no outside server needed). */
  console: { tileUrl: string | undefined; tileAttribution: string | undefined };
}

/**
 * An empty variable counts as unset (compose files pass `${X:-}`), except where empty is
 * itself a setting: no shared-subscription group means a plain subscription.
 */
const EMPTY_IS_A_VALUE = new Set(['GANTRY_INGEST_SHARED_GROUP']);

/** Reads and validates the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(
    Object.entries(env).filter(
      ([key, value]) => key.startsWith('GANTRY_') && value !== undefined && (value !== '' || EMPTY_IS_A_VALUE.has(key)),
    ),
  );
  const parsed = environmentSchema.safeParse(present);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = issue.path.join('.');
        const value = present[name];
        const shown = value === undefined || /TOKEN|PASSWORD|URL/.test(name) ? '' : ` (got "${value}")`;
        return `${name}: ${issue.message}${shown}`;
      }),
    );
  }
  const e = parsed.data;
  return {
    databaseUrl: e.GANTRY_DATABASE_URL,
    readReplica: {
      url: e.GANTRY_DATABASE_READ_URL,
      maxLagSeconds: e.GANTRY_READ_MAX_LAG_SECONDS,
      lagCheckMs: e.GANTRY_READ_LAG_CHECK_MS,
    },
    dataDir: e.GANTRY_DATA_DIR,
    storageMode: e.GANTRY_STORAGE_MODE,
    embeddedPostgresPort: e.GANTRY_EMBEDDED_PG_PORT,
    fileStorage:
      e.GANTRY_FILE_STORAGE === 'auto' ? (e.GANTRY_DATABASE_URL ? 'database' : 'disk') : e.GANTRY_FILE_STORAGE,
    fixedPorts: {
      http: 'GANTRY_PORT' in present,
      mqtt: 'GANTRY_MQTT_PORT' in present,
      embeddedPostgres: 'GANTRY_EMBEDDED_PG_PORT' in present,
    },
    runMigrations: e.GANTRY_RUN_MIGRATIONS,
    dbPoolSize: e.GANTRY_DB_POOL_SIZE,
    mqtt: {
      url: e.GANTRY_MQTT_URL,
      embeddedPort: e.GANTRY_MQTT_PORT,
      username: e.GANTRY_MQTT_USERNAME,
      password: e.GANTRY_MQTT_PASSWORD,
    },
    nats: {
      urls: e.GANTRY_NATS_URLS?.split(',') ?? [],
      replicas: e.GANTRY_NATS_REPLICAS,
    },
    http: {
      host: e.GANTRY_HOST,
      port: e.GANTRY_PORT,
      publicUrl: e.GANTRY_PUBLIC_URL,
      adminToken: e.GANTRY_ADMIN_TOKEN,
      maxJsonBytes: e.GANTRY_MAX_JSON_BYTES,
      maxUploadBytes: e.GANTRY_MAX_UPLOAD_BYTES,
      requestTimeoutMs: e.GANTRY_REQUEST_TIMEOUT_MS,
      statementTimeoutMs: e.GANTRY_API_STATEMENT_TIMEOUT_MS,
    },
    log: {
      level: e.GANTRY_LOG_LEVEL,
      format: e.GANTRY_LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json'),
    },
    ingest: {
      batchSize: e.GANTRY_INGEST_BATCH_SIZE,
      batchMs: e.GANTRY_INGEST_BATCH_MS,
      source: e.GANTRY_INGEST_SOURCE,
      sharedGroup: e.GANTRY_INGEST_SHARED_GROUP,
      clientId: e.GANTRY_INGEST_CLIENT_ID,
      maxPayloadBytes: e.GANTRY_INGEST_MAX_PAYLOAD_BYTES,
      maxFutureSeconds: e.GANTRY_INGEST_MAX_FUTURE_SECONDS,
      maxInFlight: e.GANTRY_INGEST_MAX_IN_FLIGHT,
      maxInFlightBytes: e.GANTRY_INGEST_MAX_IN_FLIGHT_BYTES,
      sessionExpirySeconds: e.GANTRY_INGEST_SESSION_EXPIRY_SECONDS,
      writers: e.GANTRY_INGEST_WRITERS,
      writeMethod: e.GANTRY_INGEST_WRITE_METHOD,
      statementTimeoutMs: e.GANTRY_INGEST_STATEMENT_TIMEOUT_MS,
      drainTimeoutMs: e.GANTRY_INGEST_DRAIN_TIMEOUT_MS,
      metricsPort: e.GANTRY_INGEST_METRICS_PORT,
      heapGrowthPercent: e.GANTRY_INGEST_HEAP_GROWTH_PERCENT,
    },
    retention: { bronzeDays: e.GANTRY_BRONZE_RETENTION_DAYS, readingDays: e.GANTRY_READING_RETENTION_DAYS },
    worker: {
      pollMs: e.GANTRY_WORKER_POLL_MS,
      metricsPort: e.GANTRY_WORKER_METRICS_PORT,
      deviceBatch: e.GANTRY_WORKER_DEVICE_BATCH,
      derivationLoops: e.GANTRY_WORKER_DERIVATION_LOOPS,
      goldRefreshMs: e.GANTRY_GOLD_REFRESH_MS,
    },
    derivation: {
      maxReadings: e.GANTRY_DERIVATION_MAX_READINGS,
      carryLagSeconds: e.GANTRY_DERIVATION_CARRY_LAG_SECONDS,
      gapSeconds: e.GANTRY_DERIVATION_GAP_SECONDS,
      movingMinSpeedMps: e.GANTRY_DERIVATION_MOVING_SPEED_MPS,
      movingMinDistanceM: e.GANTRY_DERIVATION_MOVING_DISTANCE_M,
      stopMinSeconds: e.GANTRY_DERIVATION_STOP_SECONDS,
      imuAnomalyG: e.GANTRY_DERIVATION_IMU_ANOMALY_G,
      identifierTimeoutSeconds: e.GANTRY_DERIVATION_IDENTIFIER_TIMEOUT_SECONDS,
      geofenceAlertMaxAgeSeconds: e.GANTRY_GEOFENCE_ALERT_MAX_AGE_SECONDS,
    },
    telemetryStatus: {
      onlineSeconds: e.GANTRY_DEVICE_ONLINE_SECONDS,
      silentSeconds: e.GANTRY_DEVICE_SILENT_SECONDS,
      maxErrorRatePercent: e.GANTRY_QUALITY_MAX_ERROR_PERCENT,
      minGpsOkPercent: e.GANTRY_QUALITY_MIN_GPS_OK_PERCENT,
      minGpsFixes: e.GANTRY_QUALITY_MIN_GPS_FIXES,
    },
    webhooks: {
      maxAttempts: e.GANTRY_WEBHOOK_MAX_ATTEMPTS,
      backoffSeconds: e.GANTRY_WEBHOOK_BACKOFF_SECONDS,
      timeoutSeconds: e.GANTRY_WEBHOOK_TIMEOUT_SECONDS,
      allowPrivateTargets: e.GANTRY_WEBHOOK_ALLOW_PRIVATE_TARGETS,
      concurrency: e.GANTRY_WEBHOOK_CONCURRENCY,
      concurrencyPerSubscription: e.GANTRY_WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION,
    },
    rateLimit: {
      perSecond: e.GANTRY_RATE_LIMIT_PER_SECOND,
      burst: e.GANTRY_RATE_LIMIT_BURST,
      exportsPerMinute: e.GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE,
      redisUrl: e.GANTRY_REDIS_URL,
    },
    demo: { enabled: e.GANTRY_DEMO, simulator: e.GANTRY_DEMO_SIMULATOR },
    console: { tileUrl: e.GANTRY_CONSOLE_TILE_URL, tileAttribution: e.GANTRY_CONSOLE_TILE_ATTRIBUTION },
  };
}

/** The configuration with a database URL resolved (after an embedded server started, say). */
export type ResolvedConfig = Config & { databaseUrl: string };

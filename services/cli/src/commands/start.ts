import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '@gantry/config';
import { choosePort, createOutbox, migrateDatabase, onShutdown, openDatabase, startEmbeddedPostgres } from '@gantry/db';
import { startApiServer } from '@gantry/api';
import { startIngest } from '@gantry/ingest';
import { startWorker } from '@gantry/worker';
import type { Command, CommandContext } from '../command.ts';
import { startEmbeddedBroker } from '../embedded-broker.ts';
import { removeRunningFile, writeRunningFile } from '../running.ts';
import { ensureDemo, startDemoFleetFromDatabase, type DemoFleetStart, type DemoKeys } from './demo.ts';

/** The admin token: configured, or generated once and kept in the data directory. */
async function adminToken(config: Config): Promise<{ token: string; generated: boolean }> {
  if (config.http.adminToken) return { token: config.http.adminToken, generated: false };
  const file = path.join(path.resolve(config.dataDir), 'admin-token');
  if (existsSync(file)) return { token: (await readFile(file, 'utf8')).trim(), generated: true };
  const token = randomBytes(24).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return { token, generated: true };
}

/** The line telling that a default port was taken and which one was used instead. */
function movedPort(listener: string, requested: number, used: number, variable: string): string[] {
  return requested === used
    ? []
    : [`${requested} is taken, so the ${listener} listens on ${used} (${variable} sets the port)`];
}

export const startCommand: Command = {
  name: 'start',
  summary: 'Run api + ingest + worker in one process (embedded PostgreSQL and MQTT broker when none is configured)',
  usage: 'gantry start',
  async run(_argv, context) {
    const stopper = createStopper(context);
    onShutdown(context.logger, stopper.stopAll);
    await startGantry(context, stopper);
  },
};

/** What `gantry start` started, stopped in reverse order of starting. */
export interface Stopper {
  stops: Array<() => Promise<void>>;
  stopAll(): Promise<void>;
}

export function createStopper({ logger }: CommandContext): Stopper {
  const stops: Array<() => Promise<void>> = [];
  return {
    stops,
    async stopAll() {
      for (const stop of stops.reverse())
        await stop().catch((error: unknown) => logger.warn({ err: error }, 'stop failed'));
      stops.length = 0;
    },
  };
}

/** Starts everything `gantry start` runs, registering each stop with `stopper`. */
export async function startGantry(context: CommandContext, stopper: Stopper): Promise<void> {
  try {
    await startAll(context, stopper.stops);
  } catch (error) {
    // Whatever did start (the embedded PostgreSQL above all) must not outlive us.
    await stopper.stopAll();
    throw error;
  }
}

async function startAll(
  { config: baseConfig, logger, print }: CommandContext,
  stops: Array<() => Promise<void>>,
): Promise<void> {
  await mkdir(path.resolve(baseConfig.dataDir), { recursive: true });
  // The broker first: it starts in no time, so a port conflict shows at once, and it
  // holds its port while the embedded PostgreSQL (slow on a first start) comes up.
  const moved: string[] = [];
  let mqttUrl = baseConfig.mqtt.url;
  if (!mqttUrl) {
    const broker = await startEmbeddedBroker(
      { port: baseConfig.mqtt.embeddedPort, fixed: baseConfig.fixedPorts.mqtt },
      logger,
    );
    stops.push(() => broker.stop());
    mqttUrl = broker.url;
    moved.push(...movedPort('MQTT broker', baseConfig.mqtt.embeddedPort, broker.port, 'GANTRY_MQTT_PORT'));
  }
  let databaseUrl = baseConfig.databaseUrl;
  let embeddedPostgresPort: number | null = null;
  if (!databaseUrl) {
    const embedded = await startEmbeddedPostgres({
      dataDir: baseConfig.dataDir,
      port: baseConfig.embeddedPostgresPort,
      fixedPort: baseConfig.fixedPorts.embeddedPostgres,
      logger,
    });
    // Stopped last, after the broker that started before it.
    stops.unshift(() => embedded.stop());
    databaseUrl = embedded.url;
    embeddedPostgresPort = embedded.port;
    if (!embedded.reused) {
      moved.push(
        ...movedPort('embedded PostgreSQL', baseConfig.embeddedPostgresPort, embedded.port, 'GANTRY_EMBEDDED_PG_PORT'),
      );
    }
  }
  const token = await adminToken(baseConfig);
  const config: Config = {
    ...baseConfig,
    databaseUrl,
    mqtt: { ...baseConfig.mqtt, url: mqttUrl },
    http: { ...baseConfig.http, adminToken: token.token },
  };

  await migrateDatabase(databaseUrl, { storageMode: config.storageMode, retention: config.retention, logger });
  const { pool, storageMode } = await openDatabase({ ...config, databaseUrl, runMigrations: false }, logger, 'gantry');
  stops.push(() => pool.end());
  const outbox = createOutbox({ maxAttempts: config.webhooks.maxAttempts });

  let demo: DemoKeys | null = null;
  const keysFile = path.join(path.resolve(config.dataDir), 'demo-keys.json');
  const tenants = await pool.query<{ count: number }>('SELECT count(*)::int AS count FROM tenants');
  if (config.demo.enabled && tenants.rows[0]?.count === 0) {
    demo = await ensureDemo(pool, config.webhooks.maxAttempts);
    await writeFile(keysFile, JSON.stringify(demo, null, 2), { mode: 0o600 });
  } else if (existsSync(keysFile)) {
    demo = JSON.parse(await readFile(keysFile, 'utf8')) as DemoKeys;
  }

  const worker = startWorker({ config, pool, logger, outbox, storageMode });
  stops.push(() => worker.stop());
  const ingest = await startIngest({ config, pool, logger, storageMode });
  stops.push(() => ingest.stop());
  const apiPort = await choosePort({
    port: config.http.port,
    fixed: config.fixedPorts.http,
    host: config.http.host,
    listener: 'the API',
    remedy: 'set GANTRY_PORT to a free port',
  });
  const api = await startApiServer(
    {
      config,
      pool,
      logger,
      outbox,
      readiness: {
        database: async () => void (await pool.query('SELECT 1')),
        broker: async () => {
          if (!ingest.isConnected()) throw new Error('ingest is not connected to the broker');
        },
      },
    },
    { host: config.http.host, port: apiPort },
  );
  stops.push(() => api.close());
  moved.push(...movedPort('API', config.http.port, apiPort, 'GANTRY_PORT'));

  // The demo fleet: every enabled device of the demo tenant drives around the yard; on a
  // fresh demo it uploads its recent past first (in the background: the banner comes now).
  let simulated: DemoFleetStart | null = null;
  if (config.demo.simulator) {
    simulated = await startDemoFleetFromDatabase(pool, {
      mqttUrl,
      username: config.mqtt.username,
      password: config.mqtt.password,
      logger,
    });
    const fleet = simulated?.fleet;
    if (fleet) stops.splice(stops.length - 1, 0, () => fleet.stop());
  }

  const running = await writeRunningFile(config.dataDir, {
    api: api.port,
    mqtt: Number(new URL(mqttUrl).port || 1883),
    postgres: embeddedPostgresPort,
  });
  stops.push(() => removeRunningFile(running));

  const base = config.http.publicUrl ?? `http://localhost:${api.port}`;
  print('');
  print(`Gantry is running (${storageMode} mode).`);
  for (const note of moved) print(`  Port:      ${note}`);
  print(`  API:       ${base}/api/external/v1`);
  print(`  Guide:     ${base}/api/external/v1/guide`);
  print(`  Reference: ${base}/api/external/v1/docs`);
  print(`  MQTT:      ${mqttUrl}   (devices publish to gantry/v1/devices/{deviceId}/{type})`);
  if (simulated) {
    const past = simulated.history ? `, uploading their last ${simulated.historyHours} hours first` : '';
    print(
      `  Simulator: ${simulated.devices} demo machines publishing${past} (GANTRY_DEMO_SIMULATOR=false turns it off)`,
    );
  }
  if (baseConfig.databaseUrl) print(`  Database:  ${databaseUrl.replace(/:[^:@/]+@/, ':****@')}`);
  else
    print(
      `  Database:  ${databaseUrl.replace(/:[^:@/]+@/, ':****@')}   (embedded; \`pnpm gantry database-url\` prints it with its password, and CLI commands find it by themselves)`,
    );
  print(`  Admin API: ${base}/api/admin/v1   (reference: ${base}/api/admin/v1/docs)`);
  if (token.generated) print(`  Admin token (Authorization: Bearer …): ${token.token}`);
  print(`  Console:   ${base}/console   (operations console in the browser: sign in with an API key)`);
  if (demo) {
    print(`  Demo tenant key:   ${demo.tenantKey}`);
    print(`  Demo customer key: ${demo.customerKey}   (sees only "${demo.customerName}")`);
    print(`  Try: curl -H 'X-API-Key: ${demo.tenantKey}' ${base}/api/external/v1/me`);
  }
  print('Press Ctrl-C to stop.');
}

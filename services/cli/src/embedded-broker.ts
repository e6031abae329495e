import net from 'node:net';
import { Aedes } from 'aedes';
import type { Logger } from '@gantry/logger';
import { isPortInUse } from '@gantry/db';

export interface EmbeddedBroker {
  url: string;
  stop(): Promise<void>;
}

/**
 * An in-process MQTT broker (aedes) on 127.0.0.1:port for the zero-setup start. It
 * speaks MQTT 3.1.1 with persistent sessions held in memory: enough for a newcomer's
 * machine, not for production (docker-compose.yml runs Mosquitto).
 */
export async function startEmbeddedBroker(port: number, logger: Logger): Promise<EmbeddedBroker> {
  if (await isPortInUse(port)) {
    throw new Error(
      `port ${port} is already in use, so the embedded MQTT broker cannot start there; ` +
        `set GANTRY_MQTT_PORT to a free port, or GANTRY_MQTT_URL to use that broker`,
    );
  }
  const broker = await Aedes.createBroker({ drainTimeout: 30_000 });
  const server = net.createServer(broker.handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  logger.info({ port }, 'embedded MQTT broker listening');
  return {
    url: `mqtt://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        broker.close(() => server.close(() => resolve()));
      }),
  };
}

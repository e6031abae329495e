import { createOutbox, createPool, migrateDatabase, type Pool } from '@gantry/db';
import { DEMO_CUSTOMER_NAME, DEMO_TENANT_NAME, provisioning, provisionDemo } from '@gantry/api';
import { requireDatabaseUrl, type Command } from '../command.ts';

export interface DemoKeys {
  tenantId: string;
  tenantKey: string;
  customerKey: string;
  customerName: string;
  created: boolean;
}

/**
 * Provisions the demo tenant if the database has none, or issues two new keys for the
 * existing one (keys are stored hashed and cannot be shown again).
 */
export async function ensureDemo(pool: Pool, maxAttempts: number): Promise<DemoKeys> {
  const deps = { pool, outbox: createOutbox({ maxAttempts }) };
  const existing = await pool.query<{ id: string }>('SELECT id FROM tenants WHERE name = $1 ORDER BY created_at LIMIT 1', [DEMO_TENANT_NAME]);
  const tenantId = existing.rows[0]?.id;
  if (tenantId === undefined) {
    const demo = await provisionDemo(deps);
    return { tenantId: demo.tenantId, tenantKey: demo.tenantKey, customerKey: demo.customerKey, customerName: demo.customerName, created: true };
  }
  const stamp = new Date().toISOString().slice(0, 19);
  const tenantKey = await provisioning.createApiKey(deps, tenantId, { name: `Demo tenant key ${stamp}` });
  const customerKey = await provisioning.createApiKey(deps, tenantId, { name: `Demo customer key ${stamp}`, customerName: DEMO_CUSTOMER_NAME });
  return { tenantId, tenantKey: tenantKey.key, customerKey: customerKey.key, customerName: DEMO_CUSTOMER_NAME, created: false };
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'Provision the demo tenant (or new keys for it) and print a tenant key and a customer key',
  usage: 'gantry demo',
  async run(_argv, { config, logger, print }) {
    const url = requireDatabaseUrl(config);
    await migrateDatabase(url, { storageMode: config.storageMode, retention: config.retention, logger });
    const pool = createPool(url, { max: 2, applicationName: 'gantry-cli' });
    try {
      const keys = await ensureDemo(pool, config.webhooks.maxAttempts);
      print(keys.created ? `demo tenant created: ${keys.tenantId}` : `demo tenant ${keys.tenantId} exists; new keys issued`);
      print(`tenant key:   ${keys.tenantKey}`);
      print(`customer key: ${keys.customerKey}   (sees only "${keys.customerName}")`);
    } finally {
      await pool.end();
    }
  },
};

import { createOutbox, type Pool } from '@gantry/db';
import { provisioning } from '@gantry/api';

/** Provisioning straight through the service layer, for test set-up. */
export function provisioner(pool: Pool) {
  return { pool, outbox: createOutbox({ maxAttempts: 3 }) };
}

export interface TenantFixture {
  tenantId: string;
  tenantKey: string;
  /** Keys scoped to each customer name given. */
  customerKeys: Record<string, string>;
}

/** A tenant with a tenant-wide key and one customer-scoped key per customer name. */
export async function createTenantWithKeys(
  pool: Pool,
  customers: string[] = [],
  name = 'Test tenant',
): Promise<TenantFixture> {
  const deps = provisioner(pool);
  const tenant = await provisioning.createTenant(deps, { name });
  const tenantKey = await provisioning.createApiKey(deps, tenant.id, { name: 'tenant key' });
  const customerKeys: Record<string, string> = {};
  for (const customerName of customers) {
    customerKeys[customerName] = (
      await provisioning.createApiKey(deps, tenant.id, { name: `${customerName} key`, customerName })
    ).key;
  }
  return { tenantId: tenant.id, tenantKey: tenantKey.key, customerKeys };
}

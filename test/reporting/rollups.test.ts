import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys, provisioner, type TenantFixture } from '../support/fixtures.ts';

// The overview reads trigger-maintained rollups for whole days and rows for the partial
// days. These tests mutate inspections, reports and assets every way the schema allows
// and check that (1) the rollups and denormalised columns equal a from-scratch rebuild,
// (2) the overview equals counts taken straight from the rows, for ranges cut anywhere.

let db: TestDatabase;
let api: TestApi;
let tenant: TenantFixture;
const customers = ['Acme', 'Beta', ''];
const statuses = ['completed', 'rejected', 'in_progress'];
const outcomes = ['completed', 'rejected'];
const impacts = ['none', 'warning', 'out_of_service'];

/** A small deterministic PRNG, so a failure replays the same way. */
function prng(seed: number) {
  let state = seed;
  return {
    next(): number {
      state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
      return state / 2_147_483_648;
    },
    pick<T>(items: readonly T[]): T {
      return items[Math.floor(this.next() * items.length)] as T;
    },
    time(): string {
      // Any instant between 2026-01-01 and 2026-12-31, to the second.
      return new Date(Date.UTC(2026, 0, 1) + Math.floor(this.next() * 364 * 86_400) * 1000).toISOString();
    },
  };
}

async function snapshot(tenantId: string) {
  const query = async (text: string) => (await db.pool.query(text, [tenantId])).rows;
  return {
    inspections: await query(
      `SELECT customer_name, grain, period, status, template_id, rejected, sum(inspections)::int AS n FROM reporting_inspection_rollup
        WHERE tenant_id = $1 GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(inspections) <> 0 ORDER BY 1, 2, 3, 4, 5, 6`,
    ),
    reports: await query(
      `SELECT customer_name, grain, period, outcome, impact, sum(reports)::int AS n FROM reporting_report_rollup
        WHERE tenant_id = $1 GROUP BY 1, 2, 3, 4, 5 HAVING sum(reports) <> 0 ORDER BY 1, 2, 3, 4, 5`,
    ),
    requests: await query(
      `SELECT customer_name, grain, period, status, category, priority, cancel_reason, sum(requests)::int AS n
         FROM reporting_service_request_rollup
        WHERE tenant_id = $1 GROUP BY 1, 2, 3, 4, 5, 6, 7 HAVING sum(requests) <> 0 ORDER BY 1, 2, 3, 4, 5, 6, 7`,
    ),
    assets: await query(
      `SELECT customer_name, facet, label, sum(assets)::int AS n FROM reporting_asset_facets
        WHERE tenant_id = $1 GROUP BY 1, 2, 3 HAVING sum(assets) <> 0 ORDER BY 1, 2, 3`,
    ),
    columns: await query(
      `SELECT id, customer_name, report_outcome, report_impact, report_count FROM inspections WHERE tenant_id = $1 ORDER BY id`,
    ),
    reportColumns: await query(`SELECT id, customer_name FROM reports WHERE tenant_id = $1 ORDER BY id`),
    derived: await query(
      `SELECT id, inspection_count, report_count, latest_inspection_at, latest_report_at, latest_impact, latest_outcome
         FROM assets WHERE tenant_id = $1 ORDER BY id`,
    ),
  };
}

beforeAll(async () => {
  db = await createTestDatabase('reporting_rollups');
  api = await startTestApi(db.pool, db.url);
  tenant = await createTenantWithKeys(db.pool, ['Acme', 'Beta'], 'Rollups');
  const deps = provisioner(db.pool);
  const random = prng(42);
  const t = tenant.tenantId;
  const types = [
    await provisioning.createAssetType(deps, t, { name: 'Type A' }),
    await provisioning.createAssetType(deps, t, { name: 'Type B' }),
  ];
  const templates = [
    await provisioning.createTemplate(deps, t, { name: 'Template A' }),
    await provisioning.createTemplate(deps, t, { name: 'Template B' }),
  ];
  const assets: string[] = [];
  for (let index = 0; index < 12; index += 1) {
    const asset = await provisioning.createAsset(deps, t, {
      name: `Asset ${index}`,
      identifier: `A-${index}`,
      assetTypeId: index % 3 === 2 ? undefined : random.pick(types).id,
      customerName: random.pick(customers),
      location: random.pick(['Yard A', 'Yard B', '']),
      lifecycleStatus: random.pick(['active', 'active', 'retired']),
    });
    assets.push(asset.id);
  }
  const inspections: string[] = [];
  for (let index = 0; index < 80; index += 1) {
    const status = random.pick(statuses);
    const inspection = await provisioning.createInspection(deps, t, {
      assetId: random.pick(assets),
      templateId: random.next() < 0.2 ? null : random.pick(templates).id,
      status,
      startedAt: random.time(),
      completedAt: status === 'in_progress' ? null : random.time(),
    });
    inspections.push(inspection.id);
    const reportCount = Math.floor(random.next() * 3);
    for (let r = 0; r < reportCount; r += 1) {
      await provisioning.createReport(deps, t, {
        inspectionId: inspection.id,
        outcome: random.pick(outcomes),
        impact: random.pick(impacts),
        createdAt: random.time(),
      });
    }
  }

  const requestStatuses = ['new', 'triaged', 'in_progress', 'resolved', 'closed', 'cancelled'];
  for (let seq = 1; seq <= 40; seq += 1) {
    const status = random.pick(requestStatuses);
    await db.pool.query(
      `INSERT INTO service_requests (tenant_id, seq, display_code, title, customer_name, status, priority, category, cancel_reason, created_at)
       VALUES ($1, $2::int, 'SR-' || $2::int, 'Request', $3, $4, $5, $6, $7, $8)`,
      [
        t,
        seq,
        random.pick(customers),
        status,
        random.pick(['low', 'urgent']),
        random.pick(['defect', 'other']),
        status === 'cancelled' && seq % 3 ? 'Duplicate' : null,
        random.time(),
      ],
    );
  }

  // Every kind of change the rows can go through after creation.
  const sql = (text: string, values: unknown[]) => db.pool.query(text, values);
  // Report picks go by offset in id order, from the seeded PRNG.
  for (let step = 0; step < 60; step += 1) {
    const inspection = random.pick(inspections);
    switch (step % 10) {
      case 0:
        await sql('UPDATE inspections SET status = $2 WHERE id = $1', [inspection, random.pick(statuses)]);
        break;
      case 1:
        await sql('UPDATE inspections SET completed_at = $2 WHERE id = $1', [inspection, random.time()]);
        break;
      case 2:
        await sql(
          `UPDATE reports SET outcome = $2, impact = $3 WHERE id = (SELECT id FROM reports WHERE tenant_id = $1 ORDER BY id LIMIT 1 OFFSET ${Math.floor(random.next() * 40)})`,
          [t, random.pick(outcomes), random.pick(impacts)],
        );
        break;
      case 3:
        await sql(
          `UPDATE reports SET created_at = $2 WHERE id = (SELECT id FROM reports WHERE tenant_id = $1 ORDER BY id LIMIT 1 OFFSET ${Math.floor(random.next() * 40)})`,
          [t, random.time()],
        );
        break;
      case 4:
        await sql(
          `UPDATE reports SET inspection_id = $2 WHERE id = (SELECT id FROM reports WHERE tenant_id = $1 ORDER BY id LIMIT 1 OFFSET ${Math.floor(random.next() * 40)})`,
          [t, inspection],
        );
        break;
      case 5:
        await sql(
          `DELETE FROM reports WHERE id = (SELECT id FROM reports WHERE tenant_id = $1 ORDER BY id LIMIT 1 OFFSET ${Math.floor(random.next() * 40)})`,
          [t],
        );
        break;
      case 6:
        await sql('UPDATE assets SET customer_name = $2 WHERE id = $1', [random.pick(assets), random.pick(customers)]);
        break;
      case 7:
        await sql('UPDATE assets SET asset_type_id = $2, location = $3, lifecycle_status = $4 WHERE id = $1', [
          random.pick(assets),
          random.pick(types).id,
          random.pick(['Yard A', 'Yard C']),
          random.pick(['active', 'retired']),
        ]);
        break;
      case 8:
        await sql('UPDATE inspections SET asset_id = $2 WHERE id = $1', [inspection, random.pick(assets)]);
        break;
      case 9:
        await sql('DELETE FROM inspections WHERE id = $1', [inspection]);
        inspections.splice(inspections.indexOf(inspection), 1);
        break;
    }
  }
  for (let step = 0; step < 20; step += 1) {
    const seq = 1 + Math.floor(random.next() * 40);
    if (step % 4 === 0)
      await sql(
        `UPDATE service_requests SET status = 'cancelled', cancel_reason = $3 WHERE tenant_id = $1 AND seq = $2`,
        [t, seq, random.pick(['Duplicate', 'Withdrawn'])],
      );
    else if (step % 4 === 1)
      await sql('UPDATE service_requests SET status = $3, priority = $4 WHERE tenant_id = $1 AND seq = $2', [
        t,
        seq,
        random.pick(requestStatuses),
        random.pick(['normal', 'urgent']),
      ]);
    else if (step % 4 === 2)
      await sql('UPDATE service_requests SET customer_name = $3, created_at = $4 WHERE tenant_id = $1 AND seq = $2', [
        t,
        seq,
        random.pick(customers),
        random.time(),
      ]);
    else await sql('DELETE FROM service_requests WHERE tenant_id = $1 AND seq = $2', [t, seq]);
  }
  await db.pool.query('DELETE FROM templates WHERE id = $1', [templates[1]!.id]);
  await db.pool.query('DELETE FROM asset_types WHERE id = $1', [types[1]!.id]);
  await db.pool.query('DELETE FROM assets WHERE id = $1', [assets[0]]);
});

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

describe('reporting rollups', () => {
  // Runs first: it reads what the triggers kept, before the rebuild below rewrites it.
  it('give overview counters equal to counts taken straight from the rows, for ranges cut at any instant', async () => {
    const random = prng(7);
    const ranges: Array<[string | null, string | null]> = [
      [null, null],
      ['2026-03-01T00:00:00.000Z', null],
      [null, '2026-07-01T12:34:56.000Z'],
      ['2026-03-01', '2026-06-30'],
      ['2026-02-15T00:00:00Z', '2026-05-01T00:00:00Z'],
      ['2026-04-30T23:00:00Z', '2026-05-01T01:00:00Z'],
    ];
    for (let index = 0; index < 8; index += 1) {
      const [a, b] = [random.time(), random.time()].sort();
      if (a !== b) ranges.push([a as string, b as string]);
    }
    for (const [from, to] of ranges) {
      for (const [key, customer] of [
        [tenant.tenantKey, null],
        [tenant.customerKeys.Acme as string, 'Acme'],
      ] as const) {
        const query = new URLSearchParams();
        if (from) query.set('from', from);
        if (to) query.set('to', to);
        const response = await api.external(`/reporting/overview?${query}`, key);
        const body = await json(response);
        expect(response.status, JSON.stringify(body)).toBe(200);
        const truth = (
          await db.pool.query(
            `SELECT
               (SELECT count(*)::int FROM inspections i JOIN assets a ON a.id = i.asset_id WHERE i.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR i.occurred_at >= $3) AND ($4::timestamptz IS NULL OR i.occurred_at < $4)) AS inspections,
               (SELECT count(*)::int FROM inspections i JOIN assets a ON a.id = i.asset_id WHERE i.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR i.occurred_at >= $3) AND ($4::timestamptz IS NULL OR i.occurred_at < $4)
                  AND (i.status = 'rejected' OR (SELECT r.outcome FROM reports r WHERE r.inspection_id = i.id ORDER BY r.created_at DESC, r.id DESC LIMIT 1) = 'rejected')) AS rejected_inspections,
               (SELECT count(*)::int FROM inspections i JOIN assets a ON a.id = i.asset_id WHERE i.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR i.occurred_at >= $3) AND ($4::timestamptz IS NULL OR i.occurred_at < $4)
                  AND i.status = 'completed') AS completed_inspections,
               (SELECT count(*)::int FROM reports r JOIN assets a ON a.id = r.asset_id WHERE r.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR r.created_at >= $3) AND ($4::timestamptz IS NULL OR r.created_at < $4)) AS reports,
               (SELECT count(*)::int FROM reports r JOIN assets a ON a.id = r.asset_id WHERE r.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR r.created_at >= $3) AND ($4::timestamptz IS NULL OR r.created_at < $4)
                  AND r.impact = 'out_of_service') AS out_of_service,
               (SELECT count(*)::int FROM service_requests sr WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR sr.created_at >= $3) AND ($4::timestamptz IS NULL OR sr.created_at < $4)) AS requests,
               (SELECT count(*)::int FROM service_requests sr WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR sr.created_at >= $3) AND ($4::timestamptz IS NULL OR sr.created_at < $4)
                  AND sr.status = 'cancelled') AS cancelled,
               (SELECT count(*)::int FROM service_requests sr WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2)
                  AND ($3::timestamptz IS NULL OR sr.created_at >= $3) AND ($4::timestamptz IS NULL OR sr.created_at < $4)
                  AND sr.priority = 'urgent') AS urgent,
               (SELECT count(*)::int FROM assets a WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)) AS assets,
               (SELECT count(*)::int FROM assets a WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2) AND a.lifecycle_status = 'active') AS active`,
            [tenant.tenantId, customer, from, to],
          )
        ).rows[0];
        const label = `${customer ?? 'tenant'} ${from}..${to}`;
        expect(
          {
            inspections: body.summary.inspections,
            rejected_inspections: body.summary.rejectedInspections,
            completed_inspections: body.summary.completedInspections,
            reports: body.summary.reports,
            out_of_service: body.summary.outOfServiceReports,
            requests: body.summary.serviceRequests,
            cancelled: body.summary.cancelledServiceRequests,
            urgent: body.summary.urgentServiceRequests,
            assets: body.summary.assets,
            active: body.summary.activeAssets,
          },
          label,
        ).toEqual(truth);
        const monthlyInspections = body.monthly.reduce(
          (sum: number, row: { inspections: number }) => sum + row.inspections,
          0,
        );
        const monthlyReports = body.monthly.reduce((sum: number, row: { reports: number }) => sum + row.reports, 0);
        expect([monthlyInspections, monthlyReports], label).toEqual([truth.inspections, truth.reports]);
        const statusTotal = body.breakdowns.inspectionStatus.reduce(
          (sum: number, item: { count: number }) => sum + item.count,
          0,
        );
        const typeTotal = body.breakdowns.assetType.reduce(
          (sum: number, item: { count: number }) => sum + item.count,
          0,
        );
        const requestTotal = body.breakdowns.serviceRequestStatus.reduce(
          (sum: number, item: { count: number }) => sum + item.count,
          0,
        );
        const reasonTotal = body.breakdowns.serviceRequestCancellationReason.reduce(
          (sum: number, item: { count: number }) => sum + item.count,
          0,
        );
        expect([statusTotal, typeTotal, requestTotal, reasonTotal], label).toEqual([
          truth.inspections,
          truth.assets,
          truth.requests,
          truth.cancelled,
        ]);
      }
    }
  });

  it('equal a from-scratch rebuild after inserts, updates, moves and deletes of every kind', async () => {
    const kept = await snapshot(tenant.tenantId);
    expect(kept.inspections.length).toBeGreaterThan(20);
    expect(kept.reports.length).toBeGreaterThan(20);
    await db.pool.query('SELECT reporting_rebuild($1)', [tenant.tenantId]);
    const rebuilt = await snapshot(tenant.tenantId);
    expect(kept).toEqual(rebuilt);
  });
});

import { provisioning } from '@gantry/api';
import type { Pool } from '@gantry/db';
import { createTenantWithKeys, provisioner } from '../support/fixtures.ts';

/**
 * A small tenant whose overview numbers are worked out by hand in
 * reporting-api.test.ts. Times are chosen to sit on day and month edges.
 *
 * assets   A1 Straddle carrier 01 SC-01  Straddle carrier  Yard A  Acme   active   operational   device trk-sc01, ref ERP-1001
 *          A2 Reach stacker 02    RS-02  Reach stacker     Yard B  Acme   active   out_of_service
 *          A3 Straddle carrier 03 SC-03  Straddle carrier  Yard A  Beta   retired  operational
 *          A4 Spare forklift      FL-04  (no type)         ''      ''     active   operational
 *          A5 Yard loader 05      YL-05  Reach stacker     Yard C  acme   active   operational   (lowercase: not Acme)
 * inspections (occurredAt) and reports (createdAt)
 *          I1 A1 Pre-shift completed 2026-09-10T08:00Z  op OP-007 ref INS-1   R1 none/completed 2026-09-10T09:00Z
 *          I2 A1 Pre-shift completed 2026-10-05T23:30Z                        R2 warning/completed 2026-10-06T00:15Z
 *          I3 A2 Monthly   rejected  2026-10-20T12:00Z                        R3 out_of_service/rejected 2026-10-20T13:00Z "Hydraulic leak" ref REP-77
 *          I4 A3 Pre-shift completed 2026-10-31T23:59:59Z                     R4 out_of_service/completed 2026-11-01T00:00:00Z
 *          I5 A1 (none)    in_progress started 2026-11-02T10:00Z              (no report)
 *          I6 A4 Pre-shift completed 2026-11-03T10:00Z                        R6a warning/rejected 2026-11-03T11:00Z, R6b none/completed 2026-11-04T08:00Z
 *          I7 A5 Pre-shift completed 2026-08-01T00:00Z                        R7 none/completed 2026-08-01T01:00Z
 * service requests (createdAt)
 *          S1 Acme new urgent defect 2026-10-02; S2 Acme cancelled "Duplicate" normal other 2026-10-03;
 *          S3 Beta resolved high safety 2026-10-04; S4 Acme closed low cleaning 2026-08-15
 * A second tenant holds one asset, inspection and report, never visible to the first.
 */
export interface ReportingFixture {
  tenantId: string;
  tenantKey: string;
  acmeKey: string;
  betaKey: string;
  otherTenantKey: string;
  types: Record<'sc' | 'rs' | 'fl', string>;
  templates: Record<'preShift' | 'monthly', string>;
  assets: Record<'a1' | 'a2' | 'a3' | 'a4' | 'a5', string>;
  inspections: Record<'i1' | 'i2' | 'i3' | 'i4' | 'i5' | 'i6' | 'i7', string>;
  reports: Record<'r1' | 'r2' | 'r3' | 'r4' | 'r6a' | 'r6b' | 'r7', string>;
  serviceRequests: Record<'s1' | 's2' | 's3' | 's4', string>;
  other: { assetId: string; inspectionId: string; reportId: string };
}

export async function createReportingFixture(pool: Pool): Promise<ReportingFixture> {
  const deps = provisioner(pool);
  const tenant = await createTenantWithKeys(pool, ['Acme', 'Beta'], 'Reporting tenant');
  const t = tenant.tenantId;

  const sc = await provisioning.createAssetType(deps, t, {
    name: 'Straddle carrier',
    description: 'Lifts containers between its legs',
  });
  const rs = await provisioning.createAssetType(deps, t, { name: 'Reach stacker', description: 'Telescopic boom' });
  const fl = await provisioning.createAssetType(deps, t, {
    name: 'Forklift',
    description: 'Unused type',
    fields: { mast: 'triplex' },
  });
  const preShift = await provisioning.createTemplate(deps, t, {
    name: 'Pre-shift',
    assetTypeIds: [sc.id],
    latestVersion: 3,
  });
  const monthly = await provisioning.createTemplate(deps, t, {
    name: 'Monthly',
    description: 'Monthly check',
    status: 'draft',
  });

  const asset = (input: Parameters<typeof provisioning.createAsset>[2]) => provisioning.createAsset(deps, t, input);
  const a1 = await asset({
    name: 'Straddle carrier 01',
    identifier: 'SC-01',
    displayCode: 'SC01',
    assetType: 'Straddle carrier',
    location: 'Yard A',
    customerName: 'Acme',
    externalRef: 'ERP-1001',
  });
  const a2 = await asset({
    name: 'Reach stacker 02',
    identifier: 'RS-02',
    assetType: 'Reach stacker',
    location: 'Yard B',
    customerName: 'Acme',
    operationalStatus: 'out_of_service',
  });
  const a3 = await asset({
    name: 'Straddle carrier 03',
    identifier: 'SC-03',
    assetType: 'Straddle carrier',
    location: 'Yard A',
    customerName: 'Beta',
    lifecycleStatus: 'retired',
  });
  const a4 = await asset({ name: 'Spare forklift', identifier: 'FL-04' });
  const a5 = await asset({
    name: 'Yard loader 05',
    identifier: 'YL-05',
    assetType: 'Reach stacker',
    location: 'Yard C',
    customerName: 'acme',
  });
  await provisioning.createDevice(deps, t, { deviceId: 'trk-sc01', assetId: a1.id });

  const inspect = (input: Parameters<typeof provisioning.createInspection>[2]) =>
    provisioning.createInspection(deps, t, input);
  const report = (input: Parameters<typeof provisioning.createReport>[2]) => provisioning.createReport(deps, t, input);
  const i1 = await inspect({
    assetId: a1.id,
    templateId: preShift.id,
    templateVersion: 2,
    completedAt: '2026-09-10T08:00:00Z',
    operatorIdentifier: 'OP-007',
    externalRef: 'INS-1',
    inspectorName: 'Ines',
    media: { photos: 2, videos: 0, documents: ['a.pdf'] },
  });
  const r1 = await report({
    inspectionId: i1.id,
    impact: 'none',
    outcome: 'completed',
    createdAt: '2026-09-10T09:00:00Z',
    media: { photos: 1 },
  });
  const i2 = await inspect({ assetId: a1.id, templateId: preShift.id, completedAt: '2026-10-05T23:30:00Z' });
  const r2 = await report({
    inspectionId: i2.id,
    impact: 'warning',
    outcome: 'completed',
    createdAt: '2026-10-06T00:15:00Z',
  });
  const i3 = await inspect({
    assetId: a2.id,
    templateId: monthly.id,
    status: 'rejected',
    completedAt: '2026-10-20T12:00:00Z',
  });
  const r3 = await report({
    inspectionId: i3.id,
    impact: 'out_of_service',
    outcome: 'rejected',
    rejectionReason: 'Hydraulic leak',
    createdAt: '2026-10-20T13:00:00Z',
    externalRef: 'REP-77',
  });
  const i4 = await inspect({ assetId: a3.id, templateId: preShift.id, completedAt: '2026-10-31T23:59:59Z' });
  const r4 = await report({
    inspectionId: i4.id,
    impact: 'out_of_service',
    outcome: 'completed',
    createdAt: '2026-11-01T00:00:00Z',
  });
  const i5 = await inspect({
    assetId: a1.id,
    status: 'in_progress',
    startedAt: '2026-11-02T10:00:00Z',
    completedAt: null,
  });
  const i6 = await inspect({ assetId: a4.id, templateId: preShift.id, completedAt: '2026-11-03T10:00:00Z' });
  const r6a = await report({
    inspectionId: i6.id,
    impact: 'warning',
    outcome: 'rejected',
    rejectionReason: 'Worn tyre',
    createdAt: '2026-11-03T11:00:00Z',
  });
  const r6b = await report({
    inspectionId: i6.id,
    impact: 'none',
    outcome: 'completed',
    createdAt: '2026-11-04T08:00:00Z',
  });
  const i7 = await inspect({ assetId: a5.id, templateId: preShift.id, completedAt: '2026-08-01T00:00:00Z' });
  const r7 = await report({
    inspectionId: i7.id,
    impact: 'none',
    outcome: 'completed',
    createdAt: '2026-08-01T01:00:00Z',
  });

  const request = async (
    seq: number,
    customer: string,
    status: string,
    priority: string,
    category: string,
    createdAt: string,
    cancelReason: string | null = null,
  ) => {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO service_requests (tenant_id, seq, display_code, title, customer_name, status, priority, category, cancel_reason, created_at, updated_at)
       VALUES ($1, $2::int, 'SR-' || lpad($2::int::text, 6, '0'), $3, $4, $5, $6, $7, $8, $9, $9) RETURNING id`,
      [t, seq, `Request ${seq}`, customer, status, priority, category, cancelReason, createdAt],
    );
    return (rows[0] as { id: string }).id;
  };
  const s1 = await request(1, 'Acme', 'new', 'urgent', 'defect', '2026-10-02T09:00:00Z');
  const s2 = await request(2, 'Acme', 'cancelled', 'normal', 'other', '2026-10-03T09:00:00Z', 'Duplicate');
  const s3 = await request(3, 'Beta', 'resolved', 'high', 'safety', '2026-10-04T09:00:00Z');
  const s4 = await request(4, 'Acme', 'closed', 'low', 'cleaning', '2026-08-15T09:00:00Z');

  const other = await createTenantWithKeys(pool, [], 'Other tenant');
  const otherAsset = await provisioning.createAsset(deps, other.tenantId, {
    name: 'Straddle carrier 01',
    identifier: 'SC-01',
    customerName: 'Acme',
  });
  const otherInspection = await provisioning.createInspection(deps, other.tenantId, {
    assetId: otherAsset.id,
    completedAt: '2026-10-10T10:00:00Z',
  });
  const otherReport = await provisioning.createReport(deps, other.tenantId, {
    inspectionId: otherInspection.id,
    createdAt: '2026-10-10T11:00:00Z',
  });

  return {
    tenantId: t,
    tenantKey: tenant.tenantKey,
    acmeKey: tenant.customerKeys.Acme as string,
    betaKey: tenant.customerKeys.Beta as string,
    otherTenantKey: other.tenantKey,
    types: { sc: sc.id, rs: rs.id, fl: fl.id },
    templates: { preShift: preShift.id, monthly: monthly.id },
    assets: { a1: a1.id, a2: a2.id, a3: a3.id, a4: a4.id, a5: a5.id },
    inspections: { i1: i1.id, i2: i2.id, i3: i3.id, i4: i4.id, i5: i5.id, i6: i6.id, i7: i7.id },
    reports: { r1: r1.id, r2: r2.id, r3: r3.id, r4: r4.id, r6a: r6a.id, r6b: r6b.id, r7: r7.id },
    serviceRequests: { s1, s2, s3, s4 },
    other: { assetId: otherAsset.id, inspectionId: otherInspection.id, reportId: otherReport.id },
  };
}

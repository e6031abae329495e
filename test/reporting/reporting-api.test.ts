import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createReportingFixture, type ReportingFixture } from './fixture.ts';
import { hasSoffice, libreOfficeCsv, parseCsv, readXlsxRows } from './files.ts';

// The Reporting part of the spec over real HTTP, on the hand-checked fixture of
// fixture.ts. Every JSON response is also checked against its declared schema by the
// route layer (startTestApi turns that on), so a shape mismatch fails the call.

let db: TestDatabase;
let api: TestApi;
let fx: ReportingFixture;

beforeAll(async () => {
  db = await createTestDatabase('reporting_api');
  api = await startTestApi(db.pool, db.url);
  fx = await createReportingFixture(db.pool);
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

async function get(path: string, key: string, status = 200): Promise<any> {
  const response = await api.external(path, key);
  const body = await json(response);
  expect(response.status, `${path} → ${JSON.stringify(body)}`).toBe(status);
  return body;
}

const ids = (body: { items: Array<{ id: string }> }) => body.items.map((item) => item.id);
const RANGE = 'from=2026-09-01&to=2026-11-30';

describe('GET /reporting/overview', () => {
  it('gives the tenant key every counter, breakdown, month and recent item of the range, as worked out by hand', async () => {
    const body = await get(`/reporting/overview?${RANGE}`, fx.tenantKey);
    expect(body.apiKey).toEqual({ name: 'tenant key', customerName: null, customerScoped: false });
    expect(body.scope).toEqual({ customerName: null, customerScoped: false });
    expect(body.range).toEqual({ from: '2026-09-01T00:00:00.000Z', to: '2026-11-30T23:59:59.999Z' });
    expect(body.summary).toEqual({
      assets: 5,
      activeAssets: 4,
      inactiveAssets: 1,
      inspections: 6,
      completedInspections: 4,
      rejectedInspections: 1,
      reports: 6,
      outOfServiceReports: 2,
      warningReports: 2,
      rejectedReports: 2,
      serviceRequests: 3,
      openServiceRequests: 1,
      resolvedServiceRequests: 1,
      closedServiceRequests: 0,
      cancelledServiceRequests: 1,
      urgentServiceRequests: 1,
      serviceCancellationRate: 33.33,
    });
    expect(body.breakdowns).toEqual({
      assetType: [
        { label: 'Reach stacker', count: 2 },
        { label: 'Straddle carrier', count: 2 },
        { label: '', count: 1 },
      ],
      customer: [
        { label: 'Acme', count: 2 },
        { label: '', count: 1 },
        { label: 'Beta', count: 1 },
        { label: 'acme', count: 1 },
      ],
      location: [
        { label: 'Yard A', count: 2 },
        { label: '', count: 1 },
        { label: 'Yard B', count: 1 },
        { label: 'Yard C', count: 1 },
      ],
      inspectionStatus: [
        { label: 'completed', count: 4 },
        { label: 'in_progress', count: 1 },
        { label: 'rejected', count: 1 },
      ],
      template: [
        { label: 'Pre-shift', count: 4 },
        { label: '', count: 1 },
        { label: 'Monthly', count: 1 },
      ],
      reportOutcome: [
        { label: 'completed', count: 4 },
        { label: 'rejected', count: 2 },
      ],
      serviceRequestStatus: [
        { label: 'cancelled', count: 1 },
        { label: 'new', count: 1 },
        { label: 'resolved', count: 1 },
      ],
      serviceRequestCategory: [
        { label: 'defect', count: 1 },
        { label: 'other', count: 1 },
        { label: 'safety', count: 1 },
      ],
      serviceRequestPriority: [
        { label: 'high', count: 1 },
        { label: 'normal', count: 1 },
        { label: 'urgent', count: 1 },
      ],
      serviceRequestCancellationReason: [{ label: 'Duplicate', count: 1 }],
    });
    expect(body.monthly).toEqual([
      { month: '2026-09', inspections: 1, reports: 1, outOfService: 0, rejected: 0 },
      { month: '2026-10', inspections: 3, reports: 2, outOfService: 1, rejected: 1 },
      { month: '2026-11', inspections: 2, reports: 3, outOfService: 1, rejected: 1 },
    ]);
    expect(body.recentReports.map((item: { reportId: string }) => item.reportId)).toEqual([
      fx.reports.r6b,
      fx.reports.r6a,
      fx.reports.r4,
      fx.reports.r3,
      fx.reports.r2,
      fx.reports.r1,
    ]);
    expect(body.recentReports[3]).toEqual({
      reportId: fx.reports.r3,
      inspectionId: fx.inspections.i3,
      assetName: 'Reach stacker 02',
      customerName: 'Acme',
      location: 'Yard B',
      impact: 'out_of_service',
      outcome: 'rejected',
      rejectionReason: 'Hydraulic leak',
      templateName: 'Monthly',
      createdAt: '2026-10-20T13:00:00.000Z',
    });
    expect(body.recentServiceRequests.map((item: { id: string }) => item.id)).toEqual([
      fx.serviceRequests.s3,
      fx.serviceRequests.s2,
      fx.serviceRequests.s1,
    ]);
    expect(body.recentServiceRequests[0]).toMatchObject({
      displayCode: 'SR-000003',
      status: 'resolved',
      customerName: 'Beta',
    });
  });

  it('counts only the exact customer for a customer key, overview counters and recent items included', async () => {
    const body = await get(`/reporting/overview?${RANGE}`, fx.acmeKey);
    expect(body.apiKey).toEqual({ name: 'Acme key', customerName: 'Acme', customerScoped: true });
    expect(body.scope).toEqual({ customerName: 'Acme', customerScoped: true });
    expect(body.summary).toEqual({
      assets: 2,
      activeAssets: 2,
      inactiveAssets: 0,
      inspections: 4,
      completedInspections: 2,
      rejectedInspections: 1,
      reports: 3,
      outOfServiceReports: 1,
      warningReports: 1,
      rejectedReports: 1,
      serviceRequests: 2,
      openServiceRequests: 1,
      resolvedServiceRequests: 0,
      closedServiceRequests: 0,
      cancelledServiceRequests: 1,
      urgentServiceRequests: 1,
      serviceCancellationRate: 50,
    });
    expect(body.breakdowns.customer).toEqual([{ label: 'Acme', count: 2 }]);
    expect(body.breakdowns.assetType).toEqual([
      { label: 'Reach stacker', count: 1 },
      { label: 'Straddle carrier', count: 1 },
    ]);
    expect(body.breakdowns.template).toEqual([
      { label: 'Pre-shift', count: 2 },
      { label: '', count: 1 },
      { label: 'Monthly', count: 1 },
    ]);
    expect(body.monthly).toEqual([
      { month: '2026-09', inspections: 1, reports: 1, outOfService: 0, rejected: 0 },
      { month: '2026-10', inspections: 2, reports: 2, outOfService: 1, rejected: 1 },
      { month: '2026-11', inspections: 1, reports: 0, outOfService: 0, rejected: 0 },
    ]);
    expect(body.recentReports.map((item: { reportId: string }) => item.reportId)).toEqual([
      fx.reports.r3,
      fx.reports.r2,
      fx.reports.r1,
    ]);
    expect(body.recentServiceRequests.map((item: { id: string }) => item.id)).toEqual([
      fx.serviceRequests.s2,
      fx.serviceRequests.s1,
    ]);
  });

  it('lets a tenant key narrow to a customer, and never lets a customer key widen to another', async () => {
    const tenantNarrowed = await get(`/reporting/overview?${RANGE}&customerName=Acme`, fx.tenantKey);
    const acme = await get(`/reporting/overview?${RANGE}`, fx.acmeKey);
    expect(tenantNarrowed.summary).toEqual(acme.summary);
    expect(tenantNarrowed.breakdowns).toEqual(acme.breakdowns);
    expect(tenantNarrowed.scope).toEqual({ customerName: 'Acme', customerScoped: false });

    const sameName = await get(`/reporting/overview?${RANGE}&customerName=Acme`, fx.acmeKey);
    expect(sameName.summary).toEqual(acme.summary);
    const widened = await get(`/reporting/overview?${RANGE}&customerName=Beta`, fx.acmeKey);
    expect(widened.scope).toEqual({ customerName: 'Acme', customerScoped: true });
    expect(Object.values(widened.summary).every((value) => value === 0)).toBe(true);
    expect(widened.recentReports).toEqual([]);
    expect(widened.recentServiceRequests).toEqual([]);
    expect(Object.values(widened.breakdowns).every((items) => (items as unknown[]).length === 0)).toBe(true);
    expect(widened.monthly.map((row: { month: string }) => row.month)).toEqual(['2026-09', '2026-10', '2026-11']);
  });

  it('splits ranges at any instant: RFC 3339 bounds inside a day, `to` exclusive, a date-only `to` the whole day', async () => {
    // I2 (10-05 23:30), I3, I4 (10-31 23:59:59); R2 (10-06 00:15), R3; R4 at 11-01 00:00 is excluded.
    const partial = await get('/reporting/overview?from=2026-10-05T23:00:00Z&to=2026-11-01T00:00:00Z', fx.tenantKey);
    expect(partial.range).toEqual({ from: '2026-10-05T23:00:00.000Z', to: '2026-11-01T00:00:00.000Z' });
    expect(partial.summary).toMatchObject({ inspections: 3, reports: 2, outOfServiceReports: 1, rejectedReports: 1 });
    expect(partial.monthly).toEqual([{ month: '2026-10', inspections: 3, reports: 2, outOfService: 1, rejected: 1 }]);

    const dateOnly = await get('/reporting/overview?from=2026-10-31&to=2026-10-31', fx.tenantKey);
    expect(dateOnly.range).toEqual({ from: '2026-10-31T00:00:00.000Z', to: '2026-10-31T23:59:59.999Z' });
    expect(dateOnly.summary).toMatchObject({ inspections: 1, reports: 0 });

    const insideOneDay = await get(
      '/reporting/overview?from=2026-11-03T10:30:00Z&to=2026-11-03T12:00:00Z',
      fx.tenantKey,
    );
    expect(insideOneDay.summary).toMatchObject({ inspections: 0, reports: 1, rejectedReports: 1, warningReports: 1 });

    const openEnded = await get('/reporting/overview?from=2026-11-01T00:00:00Z', fx.tenantKey);
    expect(openEnded.range).toEqual({ from: '2026-11-01T00:00:00.000Z', to: null });
    expect(openEnded.summary).toMatchObject({ inspections: 2, reports: 3 });
    expect(openEnded.monthly.map((row: { month: string }) => row.month)).toEqual(['2026-11']);
  });

  it('counts the whole history without a range, months from the first to the last activity', async () => {
    const body = await get('/reporting/overview', fx.tenantKey);
    expect(body.range).toEqual({ from: null, to: null });
    expect(body.summary).toMatchObject({
      inspections: 7,
      reports: 7,
      serviceRequests: 4,
      closedServiceRequests: 1,
      serviceCancellationRate: 25,
    });
    expect(body.monthly).toEqual([
      { month: '2026-08', inspections: 1, reports: 1, outOfService: 0, rejected: 0 },
      { month: '2026-09', inspections: 1, reports: 1, outOfService: 0, rejected: 0 },
      { month: '2026-10', inspections: 3, reports: 2, outOfService: 1, rejected: 1 },
      { month: '2026-11', inspections: 2, reports: 3, outOfService: 1, rejected: 1 },
    ]);
  });

  it('lists every month of a bounded range, empty ones as zeros', async () => {
    const body = await get('/reporting/overview?from=2026-06-15&to=2027-01-31', fx.acmeKey);
    expect(body.monthly.map((row: { month: string }) => row.month)).toEqual([
      '2026-06',
      '2026-07',
      '2026-08',
      '2026-09',
      '2026-10',
      '2026-11',
      '2026-12',
      '2027-01',
    ]);
    expect(body.monthly[0]).toEqual({ month: '2026-06', inspections: 0, reports: 0, outOfService: 0, rejected: 0 });
  });

  it.each([
    ['from=2026-13-01', 'from'],
    ['to=yesterday', 'to'],
    ['from=2026-11-02&to=2026-11-01', 'from must be before to'],
    [`customerName=${'x'.repeat(201)}`, 'customerName'],
  ])('answers 400 for %s naming the problem', async (query, fragment) => {
    const body = await get(`/reporting/overview?${query}`, fx.tenantKey, 400);
    expect(body.error).toContain(fragment);
  });

  it('answers 401 without a key', async () => {
    expect((await api.external('/reporting/overview', null)).status).toBe(401);
  });
});

describe('GET /reporting/assets and the deprecated /assets', () => {
  it('lists the tenant assets by name with their derived inspection and report fields', async () => {
    const body = await get('/reporting/assets', fx.tenantKey);
    expect(body.paging).toEqual({ limit: 100, offset: 0 });
    expect(body.scope).toEqual({ customerName: null, customerScoped: false });
    expect(body.items.map((item: { name: string }) => item.name)).toEqual([
      'Reach stacker 02',
      'Spare forklift',
      'Straddle carrier 01',
      'Straddle carrier 03',
      'Yard loader 05',
    ]);
    const a1 = body.items.find((item: { id: string }) => item.id === fx.assets.a1);
    expect(a1).toMatchObject({
      name: 'Straddle carrier 01',
      identifier: 'SC-01',
      displayCode: 'SC01',
      assetType: 'Straddle carrier',
      location: 'Yard A',
      customerName: 'Acme',
      lifecycleStatus: 'active',
      operationalStatus: 'operational',
      status: 'operational',
      externalRef: 'ERP-1001',
      inspectionCount: 3,
      reportCount: 2,
      latestInspectionAt: '2026-11-02T10:00:00.000Z',
      latestReportAt: '2026-10-06T00:15:00.000Z',
      latestImpact: 'warning',
      latestOutcome: 'completed',
    });
    const a4 = body.items.find((item: { id: string }) => item.id === fx.assets.a4);
    expect(a4).toMatchObject({
      assetType: '',
      inspectionCount: 1,
      reportCount: 2,
      latestImpact: 'none',
      latestOutcome: 'completed',
    });
  });

  it.each([
    ['status=out_of_service', ['a2']],
    ['assetType=Straddle%20carrier', ['a1', 'a3']],
    ['assetType=straddle%20carrier', []],
    ['customerName=Acme', ['a2', 'a1']],
    ['customerName=acme', ['a5']],
    ['q=sc-0', ['a1', 'a3']],
    ['q=SC01', ['a1']],
    ['q=TRK-SC', ['a1']],
    ['q=erp-1001', ['a1']],
    ['q=Loader', ['a5']],
    ['q=%25', []],
    ['q=_', []],
    ['q=%20%20', ['a2', 'a4', 'a1', 'a3', 'a5']],
    ['limit=2&offset=1', ['a4', 'a1']],
    ['limit=2&offset=4', ['a5']],
    ['offset=5', []],
  ] as const)('filters with %s', async (query, expected) => {
    const body = await get(`/reporting/assets?${query}`, fx.tenantKey);
    expect(ids(body)).toEqual(expected.map((name) => fx.assets[name]));
  });

  it('shows a customer key its own assets only; another customerName gives an empty list', async () => {
    expect(ids(await get('/reporting/assets', fx.acmeKey))).toEqual([fx.assets.a2, fx.assets.a1]);
    expect(ids(await get('/reporting/assets?q=sc-0', fx.acmeKey))).toEqual([fx.assets.a1]);
    expect(ids(await get('/reporting/assets?customerName=Acme', fx.acmeKey))).toEqual([fx.assets.a2, fx.assets.a1]);
    const widened = await get('/reporting/assets?customerName=Beta', fx.acmeKey);
    expect(widened).toEqual({
      items: [],
      paging: { limit: 100, offset: 0 },
      scope: { customerName: 'Acme', customerScoped: true },
    });
    expect(ids(await get('/reporting/assets', fx.betaKey))).toEqual([fx.assets.a3]);
    expect(ids(await get('/reporting/assets', fx.otherTenantKey))).toEqual([fx.other.assetId]);
  });

  it('serves /assets as a deprecated alias with Deprecation and a Link to its successor', async () => {
    const response = await api.external('/assets?q=sc-0', fx.tenantKey);
    expect(response.status).toBe(200);
    expect(response.headers.get('deprecation')).toMatch(/^@\d+$/); // RFC 9745: deprecated since a date
    expect(response.headers.get('link')).toBe('</api/external/v1/reporting/assets>; rel="successor-version"');
    expect(await json(response)).toEqual(await get('/reporting/assets?q=sc-0', fx.tenantKey));
    expect((await api.external('/reporting/assets', fx.tenantKey)).headers.has('deprecation')).toBe(false);
    expect((await api.external('/assets?limit=0', fx.tenantKey)).status).toBe(400);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=501', 'limit'],
    ['limit=ten', 'limit'],
    ['offset=-1', 'offset'],
    ['offset=1.5', 'offset'],
    [`q=${'a'.repeat(201)}`, 'q'],
    ['q=a%01b', 'q'],
    ['status=%00', 'status'],
  ])('answers 400 for %s naming %s', async (query, name) => {
    const body = await get(`/reporting/assets?${query}`, fx.tenantKey, 400);
    expect(body.error).toContain(name);
    expect(body.code).toBe('invalid_parameter');
  });

  it('reads one asset in scope; other customers, other tenants and unknown ids are 404, a bad id 400', async () => {
    expect(await get(`/reporting/assets/${fx.assets.a1}`, fx.acmeKey)).toMatchObject({
      id: fx.assets.a1,
      inspectionCount: 3,
    });
    expect(await get(`/reporting/assets/${fx.assets.a3}`, fx.tenantKey)).toMatchObject({
      lifecycleStatus: 'retired',
      customerName: 'Beta',
    });
    await get(`/reporting/assets/${fx.assets.a3}`, fx.acmeKey, 404);
    await get(`/reporting/assets/${fx.assets.a5}`, fx.acmeKey, 404);
    await get(`/reporting/assets/${fx.other.assetId}`, fx.tenantKey, 404);
    await get('/reporting/assets/00000000-0000-4000-8000-000000000000', fx.tenantKey, 404);
    expect((await get('/reporting/assets/not-a-uuid', fx.tenantKey, 400)).error).toContain('id');
  });
});

describe('GET /reporting/asset-types and /reporting/templates', () => {
  it('lists every type with its asset count for a tenant key', async () => {
    const body = await get('/reporting/asset-types', fx.tenantKey);
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items.map((item: { name: string; assetCount: number }) => [item.name, item.assetCount])).toEqual([
      ['Forklift', 0],
      ['Reach stacker', 2],
      ['Straddle carrier', 2],
    ]);
    expect(body.items[0]).toMatchObject({ id: fx.types.fl, description: 'Unused type', fields: { mast: 'triplex' } });
  });

  it('shows a customer key only the types of its visible assets, counted in its scope', async () => {
    const body = await get('/reporting/asset-types', fx.acmeKey);
    expect(body.items.map((item: { name: string; assetCount: number }) => [item.name, item.assetCount])).toEqual([
      ['Reach stacker', 1],
      ['Straddle carrier', 1],
    ]);
    expect((await get('/reporting/asset-types', fx.betaKey)).items.map((item: { id: string }) => item.id)).toEqual([
      fx.types.sc,
    ]);
    expect((await get('/reporting/asset-types?customerName=Beta', fx.acmeKey)).items).toEqual([]);
    expect(
      (await get('/reporting/asset-types?customerName=Beta', fx.tenantKey)).items.map(
        (item: { id: string }) => item.id,
      ),
    ).toEqual([fx.types.sc]);
  });

  it('searches type names and descriptions with q', async () => {
    expect(
      (await get('/reporting/asset-types?q=REACH', fx.tenantKey)).items.map((item: { id: string }) => item.id),
    ).toEqual([fx.types.rs]);
    expect(
      (await get('/reporting/asset-types?q=telescopic', fx.tenantKey)).items.map((item: { id: string }) => item.id),
    ).toEqual([fx.types.rs]);
  });

  it('lists the templates of the tenant, for customer keys too', async () => {
    const body = await get('/reporting/templates', fx.acmeKey);
    expect(Object.keys(body)).toEqual(['items']);
    expect(body.items).toEqual([
      expect.objectContaining({
        id: fx.templates.monthly,
        name: 'Monthly',
        description: 'Monthly check',
        status: 'draft',
        latestVersion: 1,
        assetTypeIds: [],
      }),
      expect.objectContaining({
        id: fx.templates.preShift,
        name: 'Pre-shift',
        status: 'active',
        latestVersion: 3,
        assetTypeIds: [fx.types.sc],
      }),
    ]);
    expect((await get('/reporting/templates', fx.otherTenantKey)).items).toEqual([]);
  });
});

describe('GET /reporting/inspections', () => {
  it('lists inspections newest first with asset, template, latest report and media counters', async () => {
    const body = await get('/reporting/inspections', fx.tenantKey);
    expect(body.range).toEqual({ from: null, to: null });
    expect(body.scope).toEqual({ customerName: null, customerScoped: false });
    expect(ids(body)).toEqual(
      ['i6', 'i5', 'i4', 'i3', 'i2', 'i1', 'i7'].map((name) => fx.inspections[name as keyof typeof fx.inspections]),
    );
    const i1 = body.items.find((item: { id: string }) => item.id === fx.inspections.i1);
    expect(i1).toEqual({
      id: fx.inspections.i1,
      asset: {
        id: fx.assets.a1,
        identifier: 'SC-01',
        name: 'Straddle carrier 01',
        displayCode: 'SC01',
        assetType: 'Straddle carrier',
        location: 'Yard A',
        customerName: 'Acme',
      },
      status: 'completed',
      startedAt: '2026-09-10T08:00:00.000Z',
      completedAt: '2026-09-10T08:00:00.000Z',
      occurredAt: '2026-09-10T08:00:00.000Z',
      createdAt: '2026-09-10T08:00:00.000Z',
      inspectorName: 'Ines',
      operatorIdentifier: 'OP-007',
      externalRef: 'INS-1',
      notes: '',
      media: { photos: 2, videos: 0, documents: 1, total: 3 },
      report: {
        id: fx.reports.r1,
        status: 'final',
        impact: 'none',
        outcome: 'completed',
        rejectionReason: '',
        summary: '',
        createdAt: '2026-09-10T09:00:00.000Z',
        count: 1,
      },
      template: { id: fx.templates.preShift, name: 'Pre-shift', status: 'active', version: 2, latestVersion: 3 },
    });
    const i5 = body.items.find((item: { id: string }) => item.id === fx.inspections.i5);
    expect(i5.report).toEqual({
      id: null,
      status: null,
      impact: null,
      outcome: null,
      rejectionReason: null,
      summary: null,
      createdAt: null,
      count: 0,
    });
    expect(i5.template).toEqual({ id: null, name: null, status: null, version: null, latestVersion: null });
    expect(i5.media).toEqual({ total: 0 });
    const i6 = body.items.find((item: { id: string }) => item.id === fx.inspections.i6);
    expect(i6.report).toMatchObject({ id: fx.reports.r6b, outcome: 'completed', count: 2 });
  });

  it.each([
    ['from=2026-10-01&to=2026-10-31', ['i4', 'i3', 'i2']],
    ['from=2026-10-31T23:59:59Z&to=2026-11-02T10:00:00Z', ['i4']],
    ['to=2026-09-10', ['i1', 'i7']],
    ['status=rejected', ['i3']],
    ['status=in_progress', ['i5']],
    ['outcome=rejected', ['i3']],
    ['impact=out_of_service', ['i4', 'i3']],
    ['impact=none', ['i6', 'i1', 'i7']],
    ['customerName=Beta', ['i4']],
    ['assetType=Reach%20stacker', ['i3', 'i7']],
    ['q=op-007', ['i1']],
    ['q=ins-1', ['i1']],
    ['q=trk-sc01', ['i5', 'i2', 'i1']],
    ['q=yard%20loader', ['i7']],
    ['q=nothing-like-this', []],
    ['limit=2&offset=2', ['i4', 'i3']],
  ] as const)('filters with %s', async (query, expected) => {
    const body = await get(`/reporting/inspections?${query}`, fx.tenantKey);
    expect(ids(body)).toEqual(expected.map((name) => fx.inspections[name]));
  });

  it('filters by assetId, echoes the resolved range and scopes customer keys', async () => {
    const byAsset = await get(
      `/reporting/inspections?assetId=${fx.assets.a1}&from=2026-10-01&to=2026-10-31`,
      fx.tenantKey,
    );
    expect(ids(byAsset)).toEqual([fx.inspections.i2]);
    expect(byAsset.range).toEqual({ from: '2026-10-01T00:00:00.000Z', to: '2026-10-31T23:59:59.999Z' });
    expect(byAsset.paging).toEqual({ limit: 100, offset: 0 });
    const acme = await get('/reporting/inspections', fx.acmeKey);
    expect(ids(acme)).toEqual([fx.inspections.i5, fx.inspections.i3, fx.inspections.i2, fx.inspections.i1]);
    expect(acme.scope).toEqual({ customerName: 'Acme', customerScoped: true });
    expect(ids(await get(`/reporting/inspections?assetId=${fx.assets.a3}`, fx.acmeKey))).toEqual([]);
    expect(ids(await get('/reporting/inspections?customerName=Beta', fx.acmeKey))).toEqual([]);
  });

  it('reads one inspection in scope and 404s outside it', async () => {
    const i3 = await get(`/reporting/inspections/${fx.inspections.i3}`, fx.acmeKey);
    expect(i3).toMatchObject({
      id: fx.inspections.i3,
      status: 'rejected',
      asset: { id: fx.assets.a2, assetType: 'Reach stacker' },
      report: {
        id: fx.reports.r3,
        outcome: 'rejected',
        impact: 'out_of_service',
        rejectionReason: 'Hydraulic leak',
        count: 1,
      },
      template: { id: fx.templates.monthly, name: 'Monthly', status: 'draft', version: null, latestVersion: 1 },
    });
    await get(`/reporting/inspections/${fx.inspections.i4}`, fx.acmeKey, 404);
    await get(`/reporting/inspections/${fx.other.inspectionId}`, fx.tenantKey, 404);
    await get('/reporting/inspections/123', fx.tenantKey, 400);
  });

  it.each([
    ['from=2026-02-30', 'from'],
    ['to=2026-10-01T25:00:00Z', 'to'],
    ['from=2026-10-02&to=2026-10-01', 'from must be before to'],
    ['assetId=SC-01', 'assetId'],
    ['limit=1000', 'limit'],
  ])('answers 400 for %s', async (query, fragment) => {
    expect((await get(`/reporting/inspections?${query}`, fx.tenantKey, 400)).error).toContain(fragment);
  });
});

describe('GET /reporting/reports', () => {
  it('lists reports newest first with asset, template and media', async () => {
    const body = await get('/reporting/reports', fx.tenantKey);
    expect(ids(body)).toEqual(
      ['r6b', 'r6a', 'r4', 'r3', 'r2', 'r1', 'r7'].map((name) => fx.reports[name as keyof typeof fx.reports]),
    );
    const r1 = body.items.find((item: { id: string }) => item.id === fx.reports.r1);
    expect(r1).toMatchObject({
      id: fx.reports.r1,
      inspectionId: fx.inspections.i1,
      asset: { id: fx.assets.a1, name: 'Straddle carrier 01', customerName: 'Acme' },
      createdAt: '2026-09-10T09:00:00.000Z',
      status: 'final',
      impact: 'none',
      outcome: 'completed',
      rejectionReason: '',
      media: { photos: 1, total: 1 },
      template: { id: fx.templates.preShift, name: 'Pre-shift', version: 2, latestVersion: 3 },
    });
  });

  it.each([
    ['from=2026-11-01&to=2026-11-03', ['r6a', 'r4']],
    ['to=2026-10-31', ['r3', 'r2', 'r1', 'r7']],
    ['outcome=rejected', ['r6a', 'r3']],
    ['impact=warning', ['r6a', 'r2']],
    ['status=final', ['r6b', 'r6a', 'r4', 'r3', 'r2', 'r1', 'r7']],
    ['status=draft', []],
    ['customerName=Acme', ['r3', 'r2', 'r1']],
    ['assetType=Straddle%20carrier', ['r4', 'r2', 'r1']],
    ['q=rep-77', ['r3']],
    ['q=op-007', ['r1']],
    ['q=RS-02', ['r3']],
    ['limit=1&offset=6', ['r7']],
  ] as const)('filters with %s', async (query, expected) => {
    expect(ids(await get(`/reporting/reports?${query}`, fx.tenantKey))).toEqual(
      expected.map((name) => fx.reports[name]),
    );
  });

  it('scopes customer keys and reads one report in scope', async () => {
    expect(ids(await get('/reporting/reports', fx.betaKey))).toEqual([fx.reports.r4]);
    expect(ids(await get(`/reporting/reports?assetId=${fx.assets.a1}`, fx.acmeKey))).toEqual([
      fx.reports.r2,
      fx.reports.r1,
    ]);
    expect(await get(`/reporting/reports/${fx.reports.r4}`, fx.betaKey)).toMatchObject({
      id: fx.reports.r4,
      impact: 'out_of_service',
    });
    await get(`/reporting/reports/${fx.reports.r4}`, fx.acmeKey, 404);
    await get(`/reporting/reports/${fx.other.reportId}`, fx.tenantKey, 404);
  });
});

describe('derived asset fields', () => {
  it('follow every new inspection and report created through the admin API', async () => {
    const base = `/tenants/${fx.tenantId}`;
    const before = await get(`/reporting/assets/${fx.assets.a2}`, fx.tenantKey);
    expect(before).toMatchObject({
      inspectionCount: 1,
      reportCount: 1,
      latestImpact: 'out_of_service',
      latestOutcome: 'rejected',
    });

    const created = await api.admin(`${base}/inspections`, {
      method: 'POST',
      json: { assetId: fx.assets.a2, completedAt: '2026-11-20T07:00:00Z' },
    });
    expect(created.status).toBe(201);
    const inspection = await json(created);
    const afterInspection = await get(`/reporting/assets/${fx.assets.a2}`, fx.tenantKey);
    expect(afterInspection).toMatchObject({
      inspectionCount: 2,
      reportCount: 1,
      latestInspectionAt: '2026-11-20T07:00:00.000Z',
      latestOutcome: 'rejected',
    });

    const reported = await api.admin(`${base}/reports`, {
      method: 'POST',
      json: { inspectionId: inspection.id, impact: 'warning', outcome: 'completed', createdAt: '2026-11-20T08:00:00Z' },
    });
    expect(reported.status).toBe(201);
    const afterReport = await get(`/reporting/assets/${fx.assets.a2}`, fx.tenantKey);
    expect(afterReport).toMatchObject({
      inspectionCount: 2,
      reportCount: 2,
      latestReportAt: '2026-11-20T08:00:00.000Z',
      latestImpact: 'warning',
      latestOutcome: 'completed',
    });
    // The overview and the lists see it at once too.
    const overview = await get('/reporting/overview?from=2026-11-20&to=2026-11-20', fx.acmeKey);
    expect(overview.summary).toMatchObject({ inspections: 1, reports: 1, warningReports: 1, completedInspections: 1 });
    const listed = await get('/reporting/inspections?from=2026-11-20&to=2026-11-20', fx.acmeKey);
    expect(listed.items[0].report).toMatchObject({ impact: 'warning', outcome: 'completed', count: 1 });

    // Back to the fixture's state for the other tests.
    await db.pool.query('DELETE FROM inspections WHERE id = $1', [inspection.id]);
    expect(await get(`/reporting/assets/${fx.assets.a2}`, fx.tenantKey)).toMatchObject({
      inspectionCount: 1,
      reportCount: 1,
      latestImpact: 'out_of_service',
    });
    expect((await get(`/reporting/overview?${RANGE}`, fx.tenantKey)).summary).toMatchObject({
      inspections: 6,
      reports: 6,
    });
  });
});

describe('GET /reporting/export.csv and export.xlsx', () => {
  const header = [
    'inspectionId',
    'inspectionStatus',
    'occurredAt',
    'startedAt',
    'completedAt',
    'assetId',
    'assetIdentifier',
    'assetName',
    'assetDisplayCode',
    'assetType',
    'location',
    'customerName',
    'templateName',
    'templateVersion',
    'inspectorName',
    'operatorIdentifier',
    'inspectionExternalRef',
    'reportId',
    'reportStatus',
    'reportCreatedAt',
    'impact',
    'outcome',
    'rejectionReason',
    'reportSummary',
    'reportExternalRef',
  ];

  it('exports one row per inspection and report in range, oldest first, with the export headers', async () => {
    const response = await api.external(`/reporting/export.csv?${RANGE}`, fx.tenantKey);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(response.headers.get('content-disposition')).toBe(
      'attachment; filename="reporting-2026-09-01_2026-11-30.csv"',
    );
    expect(response.headers.get('x-export-limit')).toBe('50000');
    expect(response.headers.get('x-export-offset')).toBe('0');
    expect(response.headers.get('x-export-truncated')).toBe('false');
    const rows = parseCsv(await response.text());
    expect(rows[0]).toEqual(header);
    expect(rows.slice(1).map((row) => [row[0], row[17]])).toEqual([
      [fx.inspections.i1, fx.reports.r1],
      [fx.inspections.i2, fx.reports.r2],
      [fx.inspections.i3, fx.reports.r3],
      [fx.inspections.i4, fx.reports.r4],
      [fx.inspections.i5, ''],
      [fx.inspections.i6, fx.reports.r6a],
      [fx.inspections.i6, fx.reports.r6b],
    ]);
    const i3 = rows.find((row) => row[0] === fx.inspections.i3) as string[];
    expect(Object.fromEntries(header.map((name, index) => [name, i3[index]]))).toEqual({
      inspectionId: fx.inspections.i3,
      inspectionStatus: 'rejected',
      occurredAt: '2026-10-20T12:00:00.000Z',
      startedAt: '2026-10-20T12:00:00.000Z',
      completedAt: '2026-10-20T12:00:00.000Z',
      assetId: fx.assets.a2,
      assetIdentifier: 'RS-02',
      assetName: 'Reach stacker 02',
      assetDisplayCode: 'RS-02',
      assetType: 'Reach stacker',
      location: 'Yard B',
      customerName: 'Acme',
      templateName: 'Monthly',
      templateVersion: '',
      inspectorName: '',
      operatorIdentifier: '',
      inspectionExternalRef: '',
      reportId: fx.reports.r3,
      reportStatus: 'final',
      reportCreatedAt: '2026-10-20T13:00:00.000Z',
      impact: 'out_of_service',
      outcome: 'rejected',
      rejectionReason: 'Hydraulic leak',
      reportSummary: '',
      reportExternalRef: 'REP-77',
    });
  });

  it('exports only the customer of a customer key, whatever customerName it asks for', async () => {
    const acme = parseCsv(await (await api.external(`/reporting/export.csv?${RANGE}`, fx.acmeKey)).text());
    expect(new Set(acme.slice(1).map((row) => row[11]))).toEqual(new Set(['Acme']));
    expect(acme.slice(1).map((row) => row[0])).toEqual([
      fx.inspections.i1,
      fx.inspections.i2,
      fx.inspections.i3,
      fx.inspections.i5,
    ]);
    const widened = parseCsv(await (await api.external(`/reporting/export.csv?customerName=Beta`, fx.acmeKey)).text());
    expect(widened).toEqual([header]);
    const filtered = parseCsv(
      await (await api.external(`/reporting/export.csv?outcome=rejected`, fx.tenantKey)).text(),
    );
    expect(filtered.slice(1).map((row) => row[17])).toEqual([fx.reports.r3]);
  });

  it('answers 400 for an invalid range, filter or offset before any byte of a file', async () => {
    for (const query of [
      'from=2026-11-02&to=2026-11-01',
      'from=31-12-2026',
      'offset=-5',
      'offset=x',
      'assetId=nope',
      'q=%00',
    ]) {
      for (const format of ['csv', 'xlsx']) {
        const response = await api.external(`/reporting/export.${format}?${query}`, fx.tenantKey);
        expect(response.status, `${format} ${query}`).toBe(400);
        expect(response.headers.get('content-type')).toContain('application/json');
        expect(response.headers.has('x-export-limit')).toBe(false);
      }
    }
    expect((await api.external('/reporting/export.csv', null)).status).toBe(401);
  });

  it('writes the same rows to XLSX, readable by exceljs and by LibreOffice', async (context) => {
    const csv = parseCsv(await (await api.external(`/reporting/export.csv?${RANGE}`, fx.tenantKey)).text());
    const response = await api.external(`/reporting/export.xlsx?${RANGE}`, fx.tenantKey);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(
      'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    );
    expect(response.headers.get('content-disposition')).toBe(
      'attachment; filename="reporting-2026-09-01_2026-11-30.xlsx"',
    );
    expect(response.headers.get('x-export-truncated')).toBe('false');
    const buffer = await response.arrayBuffer();
    const rows = await readXlsxRows(buffer);
    expect(rows).toEqual(csv);

    if (!(await hasSoffice())) {
      context.skip(
        'LibreOffice (soffice) is not installed: apt-get install -y libreoffice-calc-nogui to run the spreadsheet-reader check',
      );
    }
    const office = await libreOfficeCsv(buffer);
    expect(office).toHaveLength(csv.length);
    const timeColumns = new Set([2, 3, 4, 19]);
    for (let index = 0; index < csv.length; index += 1) {
      const expected = (csv[index] as string[]).map((value, column) =>
        index > 0 && timeColumns.has(column) && value !== '' ? value.replace('T', ' ').replace('Z', '') : value,
      );
      expect(office[index]).toEqual(expected);
    }
  });
});

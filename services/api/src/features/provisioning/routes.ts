import { z } from 'zod';
import { ErrorResponse } from '../../http/common-schemas.ts';
import { readFileBody } from '../../http/body.ts';
import { defineRoute, type HttpMethod, type RouteSpec } from '../../http/route.ts';
import { importFile } from './import.service.ts';
import { ImportJson, ImportRejected, ImportResult } from './import.schemas.ts';
import * as responses from './responses.ts';
import * as schemas from './schemas.ts';
import * as provisioning from './service.ts';
import type { ProvisioningDeps } from './service.ts';

const tenantParams = z.object({ tenantId: z.uuid('must be a UUID') });
const itemParams = (name: string) => tenantParams.extend({ [name]: z.uuid('must be a UUID') });

const errors = {
  400: { description: 'Invalid body', schema: ErrorResponse },
  401: { description: 'Missing or invalid admin token', schema: ErrorResponse },
  404: { description: 'Tenant or object not found', schema: ErrorResponse },
  409: { description: 'Conflicts with an existing object', schema: ErrorResponse },
};

interface AdminOperation {
  method: HttpMethod;
  path: string;
  operationId: string;
  summary: string;
  params?: z.ZodObject;
  body?: z.ZodType;
  status: number;
  response: z.ZodType;
  run: (params: Record<string, string>, body: never) => Promise<unknown>;
}

/** The admin API: bearer admin token, 201 with the created object. */
export function provisioningRoutes(deps: ProvisioningDeps): RouteSpec[] {
  const operations: AdminOperation[] = [
    {
      method: 'post',
      path: '/tenants',
      operationId: 'adminCreateTenant',
      summary: 'Create a tenant',
      body: schemas.TenantCreate,
      status: 201,
      response: responses.AdminTenant,
      run: (_, body: schemas.TenantCreate) => provisioning.createTenant(deps, body),
    },
    {
      method: 'get',
      path: '/tenants',
      operationId: 'adminListTenants',
      summary: 'List tenants',
      status: 200,
      response: z.object({ items: z.array(responses.AdminTenant) }),
      run: async () => ({ items: await provisioning.listTenants(deps) }),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/api-keys',
      operationId: 'adminCreateApiKey',
      summary: 'Create an API key (the key is in this answer only)',
      params: tenantParams,
      body: schemas.ApiKeyCreate,
      status: 201,
      response: responses.AdminApiKeyCreated,
      run: (p, body: schemas.ApiKeyCreate) => provisioning.createApiKey(deps, p.tenantId!, body),
    },
    {
      method: 'get',
      path: '/tenants/:tenantId/api-keys',
      operationId: 'adminListApiKeys',
      summary: 'List API keys (never the keys themselves)',
      params: tenantParams,
      status: 200,
      response: z.object({ items: z.array(responses.AdminApiKey) }),
      run: async (p) => ({ items: await provisioning.listApiKeys(deps, p.tenantId!) }),
    },
    {
      method: 'delete',
      path: '/tenants/:tenantId/api-keys/:keyId',
      operationId: 'adminDisableApiKey',
      summary: 'Disable an API key',
      params: itemParams('keyId'),
      status: 200,
      response: responses.AdminApiKey,
      run: (p) => provisioning.disableApiKey(deps, p.tenantId!, p.keyId!),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/asset-types',
      operationId: 'adminCreateAssetType',
      summary: 'Create an asset type',
      params: tenantParams,
      body: schemas.AssetTypeCreate,
      status: 201,
      response: responses.AdminAssetType,
      run: (p, body: schemas.AssetTypeCreate) => provisioning.createAssetType(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/assets',
      operationId: 'adminCreateAsset',
      summary: 'Create an asset (assetType by name or assetTypeId)',
      params: tenantParams,
      body: schemas.AssetCreate,
      status: 201,
      response: responses.AdminAsset,
      run: (p, body: schemas.AssetCreate) => provisioning.createAsset(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/templates',
      operationId: 'adminCreateTemplate',
      summary: 'Create an inspection template',
      params: tenantParams,
      body: schemas.TemplateCreate,
      status: 201,
      response: responses.AdminTemplate,
      run: (p, body: schemas.TemplateCreate) => provisioning.createTemplate(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/inspections',
      operationId: 'adminCreateInspection',
      summary: 'Create an inspection (raises inspection.completed when completed)',
      params: tenantParams,
      body: schemas.InspectionCreate,
      status: 201,
      response: responses.AdminInspection,
      run: (p, body: schemas.InspectionCreate) => provisioning.createInspection(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/reports',
      operationId: 'adminCreateReport',
      summary: 'Create the report of an inspection (raises report.created)',
      params: tenantParams,
      body: schemas.ReportCreate,
      status: 201,
      response: responses.AdminReport,
      run: (p, body: schemas.ReportCreate) => provisioning.createReport(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/devices',
      operationId: 'adminCreateDevice',
      summary: 'Register a telemetry device on an asset',
      params: tenantParams,
      body: schemas.DeviceCreate,
      status: 201,
      response: responses.AdminDevice,
      run: (p, body: schemas.DeviceCreate) => provisioning.createDevice(deps, p.tenantId!, body),
    },
    {
      method: 'patch',
      path: '/tenants/:tenantId/devices/:deviceId',
      operationId: 'adminUpdateDevice',
      summary: 'Change a device (asset, names, enabled)',
      params: itemParams('deviceId'),
      body: schemas.DeviceUpdate,
      status: 200,
      response: responses.AdminDevice,
      run: (p, body: schemas.DeviceUpdate) => provisioning.updateDevice(deps, p.tenantId!, p.deviceId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/operators',
      operationId: 'adminCreateOperator',
      summary: 'Create an operator (identifier → name)',
      params: tenantParams,
      body: schemas.OperatorCreate,
      status: 201,
      response: responses.AdminOperator,
      run: (p, body: schemas.OperatorCreate) => provisioning.createOperator(deps, p.tenantId!, body),
    },
    {
      method: 'post',
      path: '/tenants/:tenantId/geofences',
      operationId: 'adminCreateGeofence',
      summary: 'Create a geofence (GeoJSON Polygon or MultiPolygon)',
      params: tenantParams,
      body: schemas.GeofenceCreate,
      status: 201,
      response: responses.AdminGeofence,
      run: (p, body: schemas.GeofenceCreate) => provisioning.createGeofence(deps, p.tenantId!, body),
    },
    {
      method: 'patch',
      path: '/tenants/:tenantId/geofences/:geofenceId',
      operationId: 'adminUpdateGeofence',
      summary: 'Change a geofence',
      params: itemParams('geofenceId'),
      body: schemas.GeofenceUpdate,
      status: 200,
      response: responses.AdminGeofence,
      run: (p, body: schemas.GeofenceUpdate) => provisioning.updateGeofence(deps, p.tenantId!, p.geofenceId!, body),
    },
    {
      method: 'delete',
      path: '/tenants/:tenantId/geofences/:geofenceId',
      operationId: 'adminDeleteGeofence',
      summary: 'Delete a geofence and its alerts',
      params: itemParams('geofenceId'),
      status: 200,
      response: responses.AdminDeleted,
      run: (p) => provisioning.deleteGeofence(deps, p.tenantId!, p.geofenceId!),
    },
  ];

  return [
    ...operations.map((operation) =>
      defineRoute({
        method: operation.method,
        base: 'admin',
        path: operation.path,
        operationId: operation.operationId,
        summary: operation.summary,
        tags: ['Admin'],
        auth: 'admin',
        request: { params: operation.params, body: operation.body },
        responses: { [operation.status]: { description: 'Success', schema: operation.response }, ...errors },
        handler: async (ctx, input) => {
          ctx.status = operation.status;
          ctx.body = await operation.run((input.params ?? {}) as Record<string, string>, input.body as never);
        },
      }),
    ),
    importRoute(deps),
  ];
}

/** A whole CSV file of 10,000 rows is about 1.5 MB: the limit leaves room for long names. */
const IMPORT_MAX_BYTES = 32 * 1024 * 1024;

function importRoute(deps: ProvisioningDeps): RouteSpec {
  return defineRoute({
    method: 'post',
    base: 'admin',
    path: '/tenants/:tenantId/import',
    operationId: 'adminImport',
    summary: 'Import assets and their devices from one CSV or JSON file, all or nothing',
    description:
      'One row per device (an asset without a device leaves deviceId empty; an asset with several devices repeats ' +
      'its columns). Assets are matched by identifier and devices by deviceId, so importing the same file again ' +
      'changes nothing; an empty value keeps what is stored; missing asset types are created. CSV: a header row with ' +
      'the AdminImportRow names. JSON: `{"rows": [AdminImportRow, …]}`. Any row at fault refuses the whole file ' +
      'with a 422 listing every problem.',
    tags: ['Admin'],
    auth: 'admin',
    request: {
      params: tenantParams,
      file: { description: 'The file: text/csv, or application/json', json: ImportJson, maxBytes: IMPORT_MAX_BYTES },
    },
    responses: {
      200: { description: 'Imported: what was created, updated and left as it was', schema: ImportResult },
      ...errors,
      422: { description: 'Rows at fault; nothing was written', schema: ImportRejected },
    },
    handler: async (ctx, input) => {
      const file = await readFileBody(ctx, IMPORT_MAX_BYTES);
      ctx.body = await importFile(deps, input.params.tenantId, file.value, file.format);
    },
  });
}

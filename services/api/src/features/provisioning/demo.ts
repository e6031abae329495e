import type { ProvisioningDeps } from './service.ts';
import * as provisioning from './service.ts';

export interface DemoResult {
  tenantId: string;
  tenantName: string;
  tenantKey: string;
  customerKey: string;
  customerName: string;
  devices: Array<{ deviceId: string; assetId: string; assetName: string; customerName: string }>;
  /** Centre of the demo yard (latitude, longitude); the simulator drives around it. */
  yard: { latitude: number; longitude: number };
}

export const DEMO_TENANT_NAME = 'Gantry Demo Terminal';
export const DEMO_CUSTOMER_NAME = 'Northbay Container Terminal';
const CUSTOMERS = [DEMO_CUSTOMER_NAME, 'Harbour Logistics'] as const;
const YARD = { latitude: 51.9542, longitude: 4.0529 };
const DAY_MS = 86_400_000;

/** A rectangle [lon, lat] ring around a centre, sizes in degrees. */
function rectangle(lat: number, lon: number, halfLat: number, halfLon: number): number[][][] {
  return [
    [
      [lon - halfLon, lat - halfLat],
      [lon + halfLon, lat - halfLat],
      [lon + halfLon, lat + halfLat],
      [lon - halfLon, lat + halfLat],
      [lon - halfLon, lat - halfLat],
    ],
  ];
}

/**
 * Provisions the demo tenant: a tenant key and a customer key, 20 machines with
 * devices, operators, geofences, templates and a few months of inspections and reports.
 */
export async function provisionDemo(deps: ProvisioningDeps, options: { deviceCount?: number } = {}): Promise<DemoResult> {
  const deviceCount = options.deviceCount ?? 20;
  const tenant = await provisioning.createTenant(deps, { name: DEMO_TENANT_NAME });
  const tenantKey = await provisioning.createApiKey(deps, tenant.id, { name: 'Demo tenant key' });
  const customerKey = await provisioning.createApiKey(deps, tenant.id, { name: 'Demo customer key', customerName: CUSTOMERS[0] });

  const types = [
    await provisioning.createAssetType(deps, tenant.id, { name: 'Straddle carrier', description: 'Container straddle carrier' }),
    await provisioning.createAssetType(deps, tenant.id, { name: 'Reach stacker', description: 'Container reach stacker' }),
    await provisioning.createAssetType(deps, tenant.id, { name: 'Forklift', description: 'Forklift with container spreader' }),
  ];
  const template = await provisioning.createTemplate(deps, tenant.id, {
    name: 'Daily pre-shift check',
    description: 'Tyres, hydraulics, spreader twistlocks, lights, brakes',
    assetTypeIds: types.map((type) => type.id),
  });

  const devices: DemoResult['devices'] = [];
  for (let index = 0; index < deviceCount; index += 1) {
    const type = types[index % types.length]!;
    const customerName = CUSTOMERS[index % CUSTOMERS.length]!;
    const number = String(index + 1).padStart(2, '0');
    const code = type.name === 'Straddle carrier' ? 'SC' : type.name === 'Reach stacker' ? 'RS' : 'FL';
    const asset = await provisioning.createAsset(deps, tenant.id, {
      name: `${type.name} ${number}`,
      identifier: `${code}-${number}`,
      displayCode: `${code}${number}`,
      assetTypeId: type.id,
      location: index % 2 === 0 ? 'Yard A' : 'Yard B',
      customerName,
    });
    const device = await provisioning.createDevice(deps, tenant.id, {
      deviceId: `demo-${code.toLowerCase()}-${number}`,
      assetId: asset.id,
      displayName: `Tracker ${code}${number}`,
    });
    devices.push({ deviceId: device.deviceId, assetId: asset.id, assetName: asset.name, customerName });

    // A few months of daily checks, every tenth one rejected, some with findings.
    const now = Date.now();
    for (let week = 12; week >= 1; week -= 1) {
      const completedAt = new Date(now - week * 7 * DAY_MS - index * 3_600_000).toISOString();
      const inspection = await provisioning.createInspection(deps, tenant.id, {
        assetId: asset.id,
        templateId: template.id,
        status: 'completed',
        startedAt: new Date(Date.parse(completedAt) - 1_200_000).toISOString(),
        completedAt,
        inspectorName: 'Yard inspector',
        operatorIdentifier: `OP-${String((index % 5) + 1).padStart(3, '0')}`,
        media: { photos: (week + index) % 4, videos: 0, documents: week % 2 },
      });
      const rejected = (week + index) % 10 === 0;
      const impact = rejected ? 'out_of_service' : (week + index) % 4 === 0 ? 'warning' : 'none';
      await provisioning.createReport(deps, tenant.id, {
        inspectionId: inspection.id,
        impact,
        outcome: rejected ? 'rejected' : 'completed',
        rejectionReason: rejected ? 'Hydraulic leak on spreader' : '',
        createdAt: completedAt,
      });
    }
  }

  for (let index = 1; index <= 5; index += 1) {
    await provisioning.createOperator(deps, tenant.id, {
      identifier: `OP-${String(index).padStart(3, '0')}`,
      operatorName: ['Ana Costa', 'Ben Okafor', 'Chen Wei', 'Dora Nagy', 'Eli Haddad'][index - 1]!,
    });
  }
  await provisioning.createGeofence(deps, tenant.id, {
    name: 'Terminal yard',
    type: 'allowed',
    geometry: { type: 'Polygon', coordinates: rectangle(YARD.latitude, YARD.longitude, 0.006, 0.01) as never },
  });
  await provisioning.createGeofence(deps, tenant.id, {
    name: 'Quay crane exclusion zone',
    type: 'forbidden',
    geometry: { type: 'Polygon', coordinates: rectangle(YARD.latitude + 0.003, YARD.longitude + 0.004, 0.0006, 0.001) as never },
  });

  return {
    tenantId: tenant.id,
    tenantName: tenant.name,
    tenantKey: tenantKey.key,
    customerKey: customerKey.key,
    customerName: CUSTOMERS[0],
    devices,
    yard: YARD,
  };
}

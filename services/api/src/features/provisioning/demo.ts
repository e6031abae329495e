import { withTransaction, type Pool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import type { FileStorage } from '../../storage/index.ts';
import type { ServiceRequestCreateRequest, ServiceRequestUpdateRequest } from '../service-requests/schemas.ts';
import * as serviceRequests from '../service-requests/service.ts';
import type { ProvisioningDeps } from './service.ts';
import * as provisioning from './service.ts';

export interface DemoResult {
  tenantId: string;
  tenantName: string;
  tenantKey: string;
  customerKey: string;
  customerName: string;
  devices: Array<{ deviceId: string; assetId: string; assetName: string; customerName: string }>;
  /** Operator identifiers (OP-001, …): twice as many as machines, an earlier and a current shift. */
  operators: string[];
  /** Display codes of the service requests created, oldest first. */
  serviceRequests: string[];
  /** Centre of the demo yard (latitude, longitude); the simulator drives around it. */
  yard: { latitude: number; longitude: number };
}

export const DEMO_TENANT_NAME = 'Gantry Demo Terminal';
export const DEMO_CUSTOMER_NAME = 'Northbay Container Terminal';
const CUSTOMERS = [DEMO_CUSTOMER_NAME, 'Harbour Logistics'] as const;
const YARD = { latitude: 51.9542, longitude: 4.0529 };
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

/** Operators of the demo yard: OP-001 … OP-040 (two shifts of 20 machines). */
const OPERATOR_NAMES = [
  'Ana Costa',
  'Ben Okafor',
  'Chen Wei',
  'Dora Nagy',
  'Eli Haddad',
  'Femke de Vries',
  'Goran Petrović',
  'Hana Sato',
  'Ivan Morales',
  'Jana Novak',
  'Kofi Mensah',
  'Lena Schmidt',
  'Mateo Rossi',
  'Nadia Benali',
  'Oskar Lind',
  'Priya Nair',
  'Quentin Dubois',
  'Rosa Álvarez',
  'Sami Virtanen',
  'Tomás Ferreira',
  'Ugo Bianchi',
  'Vera Kowalski',
  'Wim Janssens',
  'Xenia Popescu',
  'Yusuf Demir',
  'Zofia Wójcik',
  'Arjun Mehta',
  'Bram Visser',
  'Carla Mendes',
  'Dmitri Volkov',
  'Emma Lindqvist',
  'Farid Rahimi',
  'Greta Hansen',
  'Hugo Lefèvre',
  'Ines Duarte',
  'Jonas Berg',
  'Keiko Tanaka',
  'Luis Ortega',
  'Maya Cohen',
  'Nils Eriksen',
] as const;

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
 * devices, 40 operators, geofences, templates, a few months of inspections and reports,
 * and a dozen service requests of the past weeks in every state.
 */
export async function provisionDemo(
  deps: ProvisioningDeps,
  options: { deviceCount?: number } = {},
): Promise<DemoResult> {
  const deviceCount = options.deviceCount ?? 20;
  const tenant = await provisioning.createTenant(deps, { name: DEMO_TENANT_NAME });
  const tenantKey = await provisioning.createApiKey(deps, tenant.id, { name: 'Demo tenant key' });
  const customerKey = await provisioning.createApiKey(deps, tenant.id, {
    name: 'Demo customer key',
    customerName: CUSTOMERS[0],
  });

  const types = [
    await provisioning.createAssetType(deps, tenant.id, {
      name: 'Straddle carrier',
      description: 'Container straddle carrier',
    }),
    await provisioning.createAssetType(deps, tenant.id, {
      name: 'Reach stacker',
      description: 'Container reach stacker',
    }),
    await provisioning.createAssetType(deps, tenant.id, {
      name: 'Forklift',
      description: 'Forklift with container spreader',
    }),
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

  const operators: string[] = [];
  for (const [index, operatorName] of OPERATOR_NAMES.entries()) {
    const operator = await provisioning.createOperator(deps, tenant.id, {
      identifier: `OP-${String(index + 1).padStart(3, '0')}`,
      operatorName,
    });
    operators.push(operator.identifier);
  }
  await provisioning.createGeofence(deps, tenant.id, {
    name: 'Terminal yard',
    type: 'allowed',
    geometry: { type: 'Polygon', coordinates: rectangle(YARD.latitude, YARD.longitude, 0.006, 0.01) as never },
  });
  await provisioning.createGeofence(deps, tenant.id, {
    name: 'Quay crane exclusion zone',
    type: 'forbidden',
    geometry: {
      type: 'Polygon',
      coordinates: rectangle(YARD.latitude + 0.003, YARD.longitude + 0.004, 0.0006, 0.001) as never,
    },
  });

  const requests = await createDemoServiceRequests(
    deps,
    { tenantId: tenant.id, customerName: null, keyId: tenantKey.id, keyName: tenantKey.name, source: 'external' },
    {
      tenantId: tenant.id,
      customerName: CUSTOMERS[0],
      keyId: customerKey.id,
      keyName: customerKey.name,
      source: 'customer',
    },
    devices,
  );

  return {
    tenantId: tenant.id,
    tenantName: tenant.name,
    tenantKey: tenantKey.key,
    customerKey: customerKey.key,
    customerName: CUSTOMERS[0],
    devices,
    operators,
    serviceRequests: requests,
    yard: YARD,
  };
}

// Service requests ------------------------------------------------------------------

type DemoStep = { afterHours: number } & (
  | { update: ServiceRequestUpdateRequest }
  | { cancel: string; duplicateOf?: number }
);

interface DemoServiceRequest {
  /** Created this many hours ago. */
  ageHours: number;
  /** Index of the demo machine it is about (null: none). */
  machine: number | null;
  /** Filed with the customer key (Northbay's own requests) instead of the tenant key. */
  byCustomer?: boolean;
  create: Omit<ServiceRequestCreateRequest, 'assetId' | 'dueAt'>;
  /** Due this many days after creation. */
  dueInDays?: number;
  /** Later changes, hours after creation. */
  steps?: DemoStep[];
}

const resolved = (resolution: string): ServiceRequestUpdateRequest => ({
  status: 'resolved',
  resolution,
  resolutionReviewed: true,
});

/**
 * A dozen requests over the past five weeks, on machines of both customers, in every
 * state: new, triaged, in progress, waiting for the customer, resolved, closed, reopened
 * and worked on again, cancelled (one as a duplicate). Four are from the last day, so
 * the default (hourly, last 24 hours) service-request metrics show them.
 */
const DEMO_SERVICE_REQUESTS: DemoServiceRequest[] = [
  {
    ageHours: 34 * 24,
    machine: 0,
    create: {
      title: 'Hydraulic leak at spreader twistlock cylinder',
      description: 'Oil dripping from the front left twistlock cylinder after lifting; the spreader still locks.',
      category: 'defect',
      priority: 'high',
      reportedByName: 'Ana Costa',
      location: 'Block A, row 12',
    },
    steps: [
      { afterHours: 2, update: { status: 'triaged', comment: 'Assigned to the hydraulics crew.' } },
      { afterHours: 26, update: { status: 'in_progress' } },
      {
        afterHours: 50,
        update: resolved('Replaced the twistlock cylinder seal kit; pressure test at 180 bar passed.'),
      },
      { afterHours: 98, update: { status: 'closed', resolutionReviewed: true } },
    ],
  },
  {
    ageHours: 33 * 24 + 21,
    machine: 0,
    byCustomer: true,
    create: {
      title: 'Oil under straddle carrier SC01 at the quay',
      category: 'defect',
      priority: 'high',
      reportedByName: 'Northbay quay supervisor',
    },
    steps: [{ afterHours: 3, cancel: 'Duplicate: the leak is already reported and being repaired.', duplicateOf: 0 }],
  },
  {
    ageHours: 27 * 24,
    machine: 1,
    create: {
      title: 'Rear camera image flickers',
      description: 'The reversing camera drops out over bumps.',
      category: 'defect',
      priority: 'normal',
      reportedByName: 'Ben Okafor',
    },
    steps: [
      { afterHours: 3, update: { status: 'triaged' } },
      { afterHours: 48, update: { status: 'in_progress' } },
      {
        afterHours: 72,
        update: resolved('Loose connector in the camera harness re-crimped and secured with a strain relief.'),
      },
    ],
  },
  {
    ageHours: 24 * 24,
    machine: 2,
    create: {
      title: 'Annual lifting equipment inspection (LOLER)',
      category: 'maintenance_request',
      priority: 'normal',
      externalRef: 'LOLER-FL03',
    },
    dueInDays: 21,
    steps: [
      { afterHours: 1, update: { status: 'triaged' } },
      { afterHours: 240, update: { status: 'in_progress', comment: 'Examiner booked.' } },
      {
        afterHours: 360,
        update: {
          status: 'closed',
          resolution: 'Thorough examination passed; certificate filed with the asset record.',
          resolutionReviewed: true,
        },
      },
    ],
  },
  {
    ageHours: 20 * 24,
    machine: 3,
    create: {
      title: 'Cab air conditioning not cooling',
      category: 'maintenance_request',
      priority: 'low',
      reportedByName: 'Dora Nagy',
    },
    steps: [
      { afterHours: 4, update: { status: 'triaged' } },
      {
        afterHours: 28,
        update: {
          status: 'waiting_customer',
          comment: 'Waiting for Harbour Logistics to release the machine for half a day.',
        },
      },
    ],
  },
  {
    ageHours: 14 * 24,
    machine: 4,
    create: {
      title: 'Oil spill in block C, lane 4',
      category: 'cleaning',
      priority: 'urgent',
      location: 'Block C, lane 4',
    },
    steps: [
      { afterHours: 0.3, update: { status: 'in_progress' } },
      { afterHours: 3, update: resolved('Spill absorbed and disposed of; lane cleaned and reopened.') },
      { afterHours: 24, update: { status: 'closed', resolutionReviewed: true } },
    ],
  },
  {
    ageHours: 9 * 24,
    machine: 5,
    create: {
      title: 'Seat belt buckle does not latch',
      category: 'safety',
      priority: 'urgent',
      reportedByName: 'Femke de Vries',
    },
    steps: [
      { afterHours: 0.5, update: { status: 'triaged' } },
      { afterHours: 2, update: { status: 'in_progress' } },
      { afterHours: 5, update: resolved('Buckle replaced.') },
      { afterHours: 50, update: { status: 'reopened', comment: 'Fails again on cold mornings.' } },
      { afterHours: 53, update: { status: 'in_progress', comment: 'Replacing the whole belt assembly.' } },
    ],
  },
  {
    ageHours: 6 * 24,
    machine: null,
    byCustomer: true,
    create: {
      title: 'Gate 3 badge reader rejects operator cards',
      category: 'access',
      priority: 'normal',
      location: 'Gate 3',
    },
    steps: [
      {
        afterHours: 24,
        update: { status: 'triaged', comment: 'Card reader firmware update requested from the vendor.' },
      },
    ],
  },
  {
    ageHours: 3 * 24,
    machine: 6,
    create: { title: 'Front left tyre worn beyond limit', category: 'maintenance_request', priority: 'high' },
    dueInDays: 7,
    steps: [
      { afterHours: 5, update: { status: 'triaged' } },
      {
        afterHours: 22,
        update: { status: 'in_progress', comment: 'Tyre ordered; fitting planned for the night shift.' },
      },
    ],
  },
  {
    ageHours: 20,
    machine: 7,
    create: {
      title: 'Spreader telescoping slow in 40 ft position',
      category: 'defect',
      priority: 'normal',
      reportedByName: 'Goran Petrović',
    },
  },
  {
    ageHours: 9,
    machine: 8,
    byCustomer: true,
    create: { title: 'Amber beacon light broken', category: 'safety', priority: 'high' },
    steps: [{ afterHours: 1, update: { status: 'triaged' } }],
  },
  {
    ageHours: 3,
    machine: 9,
    create: { title: 'Extra wash before vessel inspection', category: 'cleaning', priority: 'low' },
    steps: [{ afterHours: 1, cancel: 'No longer needed: the inspection moved to next week.' }],
  },
  {
    ageHours: 0.7,
    machine: 10,
    create: {
      title: 'Impact reported at block B',
      category: 'safety',
      priority: 'urgent',
      comment: 'Operator reports contact with a container corner; machine parked for checks.',
    },
  },
];

/** The demo creates no files: its requests never reach file storage. */
const noFileStorage: FileStorage = {
  put: () => Promise.reject(new Error('the demo provisioning stores no files')),
  get: () => Promise.resolve(null),
  delete: () => Promise.resolve(),
};

async function databaseClock(pool: Pool): Promise<Date> {
  const { rows } = await pool.query<{ now: Date }>('/* admin:demoClock */ SELECT clock_timestamp() AS now');
  return rows[0]!.now;
}

/**
 * The service stamps every change with the database's clock. The demo's requests happened
 * over the past weeks, so after each step everything that step stamped (its history
 * entries; created, updated, resolved, closed and cancelled times) moves back by the same
 * amount, to the step's time. The rest — display codes, history, outbox events, the
 * reporting rollups (kept by trigger) — is the service's own work.
 */
async function moveStepTo(pool: Pool, id: string, stepStartedAt: Date, at: Date): Promise<void> {
  const shift = [id, stepStartedAt, `${at.getTime() - stepStartedAt.getTime()} milliseconds`];
  await withTransaction(pool, async (client) => {
    await client.query(
      `/* admin:demoBackdateEvents */
       UPDATE service_request_events SET created_at = created_at + $3::interval
        WHERE service_request_id = $1 AND created_at >= $2::timestamptz`,
      shift,
    );
    await client.query(
      `/* admin:demoBackdateRequest */
       UPDATE service_requests
          SET created_at = CASE WHEN created_at >= $2::timestamptz THEN created_at + $3::interval ELSE created_at END,
              updated_at = CASE WHEN updated_at >= $2::timestamptz THEN updated_at + $3::interval ELSE updated_at END,
              resolved_at = CASE WHEN resolved_at >= $2::timestamptz THEN resolved_at + $3::interval ELSE resolved_at END,
              closed_at = CASE WHEN closed_at >= $2::timestamptz THEN closed_at + $3::interval ELSE closed_at END,
              cancelled_at = CASE WHEN cancelled_at >= $2::timestamptz THEN cancelled_at + $3::interval ELSE cancelled_at END
        WHERE id = $1`,
      shift,
    );
  });
}

/** Creates the demo's service requests through the service-request service; answers their display codes. */
async function createDemoServiceRequests(
  deps: ProvisioningDeps,
  tenantActor: serviceRequests.Actor,
  customerActor: serviceRequests.Actor,
  machines: DemoResult['devices'],
): Promise<string[]> {
  const requestDeps: serviceRequests.ServiceRequestDeps = {
    pool: deps.pool,
    outbox: deps.outbox,
    storage: noFileStorage,
    logger: silentLogger(),
  };
  const now = Date.now();
  const created: Array<{ id: string; displayCode: string }> = [];
  for (const spec of DEMO_SERVICE_REQUESTS) {
    const machine = spec.machine === null || machines.length === 0 ? null : machines[spec.machine % machines.length]!;
    const byCustomer =
      spec.byCustomer === true && (machine === null || machine.customerName === customerActor.customerName);
    const actor = byCustomer ? customerActor : tenantActor;
    const createdAt = now - spec.ageHours * HOUR_MS;
    const input: ServiceRequestCreateRequest = {
      ...spec.create,
      ...(machine ? { assetId: machine.assetId } : {}),
      ...(spec.dueInDays === undefined
        ? {}
        : { dueAt: new Date(createdAt + spec.dueInDays * DAY_MS).toISOString().slice(0, 10) }),
    };
    let startedAt = await databaseClock(deps.pool);
    const request = await serviceRequests.createServiceRequest(requestDeps, actor, input);
    await moveStepTo(deps.pool, request.id, startedAt, new Date(createdAt));
    created.push({ id: request.id, displayCode: request.displayCode });
    for (const step of spec.steps ?? []) {
      // Never in the future, whatever the table says.
      const at = new Date(Math.min(createdAt + step.afterHours * HOUR_MS, now - 60_000));
      startedAt = await databaseClock(deps.pool);
      if ('update' in step) {
        await serviceRequests.updateServiceRequest(requestDeps, actor, request.id, step.update);
      } else {
        const duplicate = step.duplicateOf === undefined ? undefined : created[step.duplicateOf]?.displayCode;
        await serviceRequests.cancelServiceRequest(requestDeps, actor, request.id, {
          reason: step.cancel,
          ...(duplicate ? { duplicateOf: duplicate } : {}),
        });
      }
      await moveStepTo(deps.pool, request.id, startedAt, at);
    }
  }
  return created.map((request) => request.displayCode);
}

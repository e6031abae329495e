import { withTransaction, type Outbox, type Pool } from '@gantry/db';
import { NotFoundError } from '../../errors.ts';
import { lockGeofenceAlert, markGeofenceAlertAcknowledged } from './geofences.repository.ts';
import type { TelemetryGeofenceAlertBody } from './schemas.ts';
import type { TelemetryScope } from './sql.ts';

/**
 * Acknowledges an alert and records `telemetry.geofence_alert.acknowledged` in the same
 * transaction. Acknowledging is idempotent: an alert already acknowledged is returned as
 * it is (first acknowledgedAt kept) and no second event is sent, so a client may retry.
 */
export async function acknowledgeGeofenceAlert(
  deps: { pool: Pool; outbox: Outbox },
  scope: TelemetryScope,
  id: string,
  acknowledgedBy: string,
): Promise<TelemetryGeofenceAlertBody> {
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockGeofenceAlert(client, scope, id);
    if (!locked) throw new NotFoundError(`geofence alert ${id} not found`);
    const { alert, latitude, longitude } = locked;
    if (alert.status === 'acknowledged') return alert;
    const acknowledgedAt = await markGeofenceAlertAcknowledged(client, id, acknowledgedBy);
    const acknowledged: TelemetryGeofenceAlertBody = {
      ...alert,
      status: 'acknowledged',
      acknowledgedAt: acknowledgedAt.toISOString(),
    };
    await deps.outbox.enqueue(client, {
      tenantId: scope.tenantId,
      event: 'telemetry.geofence_alert.acknowledged',
      entityType: 'geofence_alert',
      entityId: id,
      customerName: alert.asset.customerName,
      // The same payload as the worker's opened/resolved events, plus who acknowledged.
      data: { ...acknowledged, latitude, longitude, acknowledgedBy },
    });
    return acknowledged;
  });
}

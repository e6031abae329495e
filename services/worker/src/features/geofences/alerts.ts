import type { Outbox, PoolClient } from '@gantry/db';
import type { GeofenceTransition } from '@gantry/telemetry-core';
import {
  insertAlert,
  loadAssetRefs,
  lockZoneStates,
  membershipKey,
  resolveAlert,
  saveMembership,
  type AssetRef,
  type TenantZone,
} from './repository.ts';

export interface DeviceTransitions {
  tenantId: string;
  deviceId: string;
  transitions: GeofenceTransition[];
  /** The newest reading the run that produced them consumed. */
  lastReadingTs: number | null;
}

export interface GeofenceAlertOutcome {
  opened: number;
  resolved: number;
}

/**
 * Applies geofence transitions in the caller's transaction: memberships follow every
 * transition newer than the one they hold (re-derivation repeats transitions, which
 * then change nothing) and move their `changed_at` back when a re-derivation after late
 * data shows the state began earlier than first seen; a violation opens an alert only
 * when its transition is younger than `maxAgeMs` (late history raises no alarm); the end
 * of a violation resolves the active alert whatever its age. Each opened or resolved
 * alert writes its webhook event to the outbox in the same transaction.
 */
export async function applyGeofenceTransitions(
  client: PoolClient,
  outbox: Outbox,
  zones: Map<string, TenantZone>,
  devices: DeviceTransitions[],
  options: { now: number; maxAgeMs: number },
): Promise<GeofenceAlertOutcome> {
  const outcome: GeofenceAlertOutcome = { opened: 0, resolved: 0 };
  const all = devices.flatMap((device) => device.transitions.map((transition) => ({ device, transition })));
  if (all.length === 0) return outcome;
  const assets = await loadAssetRefs(client, [...new Set(all.map((entry) => entry.transition.assetId))]);
  const usable = all.filter((entry) => zones.has(entry.transition.geofenceId) && assets.has(entry.transition.assetId));
  const pairs = new Map<string, { geofenceId: string; assetId: string }>();
  for (const { transition } of usable) {
    pairs.set(membershipKey(transition.geofenceId, transition.assetId), {
      geofenceId: transition.geofenceId,
      assetId: transition.assetId,
    });
  }
  if (pairs.size === 0) return outcome;
  const { memberships, alerts } = await lockZoneStates(client, [...pairs.values()]);
  usable.sort((a, b) => a.transition.ts - b.transition.ts);
  const lastOfRun = new Map<string, GeofenceTransition>();
  for (const { device, transition } of usable)
    lastOfRun.set(`${device.deviceId}|${membershipKey(transition.geofenceId, transition.assetId)}`, transition);

  for (const { device, transition } of usable) {
    const zone = zones.get(transition.geofenceId)!;
    const asset = assets.get(transition.assetId)!;
    const pairKey = membershipKey(transition.geofenceId, transition.assetId);
    const membership = memberships.get(pairKey);
    const recordMembership = async () => {
      memberships.set(pairKey, { inside: transition.inside, changedAt: transition.ts, deviceId: device.deviceId });
      await saveMembership(client, {
        tenantId: device.tenantId,
        geofenceId: zone.id,
        assetId: asset.id,
        deviceId: device.deviceId,
        inside: transition.inside,
        changedAt: transition.ts,
      });
    };
    if (membership && (transition.ts <= membership.changedAt || membership.inside === transition.inside)) {
      // Late data: readings that arrived after later ones (out-of-order batches, several
      // ingests) were re-derived. When this run's last transition of the pair has the held
      // state, is older than the held one and the run read past it, the state began then:
      // the held time was only where it was first seen. Alerts are not concerned (same state).
      const readPast = device.lastReadingTs !== null && device.lastReadingTs >= membership.changedAt;
      if (
        membership.inside === transition.inside &&
        transition.ts < membership.changedAt &&
        membership.deviceId === device.deviceId &&
        readPast &&
        lastOfRun.get(`${device.deviceId}|${pairKey}`) === transition
      ) {
        await recordMembership();
      }
      continue;
    }
    await recordMembership();
    const violation = zone.type === 'forbidden' ? transition.inside : !transition.inside;
    const active = alerts.get(pairKey);
    if (violation && !active && options.now - transition.ts < options.maxAgeMs) {
      const alertType = zone.type === 'forbidden' ? 'forbidden_enter' : 'allowed_exit';
      const id = await insertAlert(client, {
        tenantId: device.tenantId,
        geofenceId: zone.id,
        assetId: asset.id,
        deviceId: device.deviceId,
        alertType,
        createdAt: transition.ts,
        latitude: transition.latitude,
        longitude: transition.longitude,
      });
      alerts.set(pairKey, {
        id,
        status: 'open',
        createdAt: new Date(transition.ts),
        acknowledgedAt: null,
        latitude: transition.latitude,
        longitude: transition.longitude,
      });
      await outbox.enqueue(client, {
        tenantId: device.tenantId,
        event: 'telemetry.geofence_alert.opened',
        entityType: 'geofence_alert',
        entityId: id,
        customerName: asset.customerName,
        data: alertPayload({
          id,
          zone,
          asset,
          alertType,
          status: 'open',
          isActive: true,
          createdAt: transition.ts,
          acknowledgedAt: null,
          resolvedAt: null,
          latitude: transition.latitude,
          longitude: transition.longitude,
        }),
      });
      outcome.opened += 1;
    } else if (!violation && active) {
      await resolveAlert(client, active.id, transition.ts);
      alerts.delete(pairKey);
      await outbox.enqueue(client, {
        tenantId: device.tenantId,
        event: 'telemetry.geofence_alert.resolved',
        entityType: 'geofence_alert',
        entityId: active.id,
        customerName: asset.customerName,
        data: alertPayload({
          id: active.id,
          zone,
          asset,
          alertType: zone.type === 'forbidden' ? 'forbidden_enter' : 'allowed_exit',
          status: active.status,
          isActive: false,
          createdAt: active.createdAt.getTime(),
          acknowledgedAt: active.acknowledgedAt?.getTime() ?? null,
          resolvedAt: transition.ts,
          latitude: active.latitude,
          longitude: active.longitude,
        }),
      });
      outcome.resolved += 1;
    }
  }
  return outcome;
}

/** The alert as the API shows it (TelemetryGeofenceAlert), plus where it happened. */
function alertPayload(alert: {
  id: string;
  zone: TenantZone;
  asset: AssetRef;
  alertType: string;
  status: string;
  isActive: boolean;
  createdAt: number;
  acknowledgedAt: number | null;
  resolvedAt: number | null;
  latitude: number | null;
  longitude: number | null;
}): Record<string, unknown> {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    id: alert.id,
    geofenceId: alert.zone.id,
    geofenceName: alert.zone.name,
    assetId: alert.asset.id,
    asset: alert.asset,
    alertType: alert.alertType,
    status: alert.status,
    isActive: alert.isActive,
    createdAt: iso(alert.createdAt),
    acknowledgedAt: iso(alert.acknowledgedAt),
    resolvedAt: iso(alert.resolvedAt),
    latitude: alert.latitude,
    longitude: alert.longitude,
  };
}

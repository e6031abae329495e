/** The webhook event catalog of the spec's Events part. */
export const webhookEventCatalog = [
  { id: 'inspection.completed', label: 'Inspection completed', entityType: 'inspection' },
  { id: 'report.created', label: 'Report created', entityType: 'report' },
  { id: 'service_request.created', label: 'Service request created', entityType: 'service_request' },
  { id: 'service_request.updated', label: 'Service request updated', entityType: 'service_request' },
  { id: 'service_request.cancelled', label: 'Service request cancelled', entityType: 'service_request' },
  { id: 'telemetry.geofence_alert.opened', label: 'Geofence alert opened', entityType: 'geofence_alert' },
  { id: 'telemetry.geofence_alert.acknowledged', label: 'Geofence alert acknowledged', entityType: 'geofence_alert' },
  { id: 'telemetry.geofence_alert.resolved', label: 'Geofence alert resolved', entityType: 'geofence_alert' },
] as const;

export type WebhookEventType = (typeof webhookEventCatalog)[number]['id'];

export const webhookEventTypes = webhookEventCatalog.map((event) => event.id) as [
  WebhookEventType,
  ...WebhookEventType[],
];

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (webhookEventTypes as string[]).includes(value);
}

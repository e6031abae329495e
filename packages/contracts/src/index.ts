export * from './geojson.ts';
export * from './events.ts';
export * from './webhooks.ts';

export * from './geojson.ts';
export * from './events.ts';

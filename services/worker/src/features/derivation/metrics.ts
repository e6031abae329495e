import { Counter, Gauge, Histogram, register } from 'prom-client';

/** Created once per process in prom-client's global registry (served at /metrics). */
function once<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

export const derivationMetrics = {
  lagSeconds: once(
    'gantry_derivation_lag_seconds',
    () =>
      new Histogram({
        name: 'gantry_derivation_lag_seconds',
        help: 'Per derived device and run: now minus the device time of the newest reading derived',
        buckets: [0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600, 86400],
      }),
  ),
  newestLagSeconds: once(
    'gantry_derivation_last_lag_seconds',
    () =>
      new Gauge({
        name: 'gantry_derivation_last_lag_seconds',
        help: 'Derivation lag of the most recent run (largest over its devices)',
      }),
  ),
  dirtyDevices: once(
    'gantry_derivation_dirty_devices',
    () => new Gauge({ name: 'gantry_derivation_dirty_devices', help: 'Devices waiting in the derivation queue' }),
  ),
  readings: once(
    'gantry_derivation_readings_total',
    () =>
      new Counter({
        name: 'gantry_derivation_readings_total',
        help: 'Readings consumed by derivation (re-reads included)',
      }),
  ),
  devices: once(
    'gantry_derivation_device_runs_total',
    () =>
      new Counter({
        name: 'gantry_derivation_device_runs_total',
        help: 'Device derivations, by path (carry, checkpoint, scratch)',
        labelNames: ['path'],
      }),
  ),
  failures: once(
    'gantry_derivation_device_failures_total',
    () =>
      new Counter({
        name: 'gantry_derivation_device_failures_total',
        help: 'Device derivations that threw and were put back in the queue',
      }),
  ),
  runSeconds: once(
    'gantry_derivation_run_seconds',
    () =>
      new Histogram({
        name: 'gantry_derivation_run_seconds',
        help: 'One derivation transaction (claim, derive, write, commit)',
        buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      }),
  ),
  alerts: once(
    'gantry_geofence_alerts_total',
    () =>
      new Counter({
        name: 'gantry_geofence_alerts_total',
        help: 'Geofence alerts opened and resolved',
        labelNames: ['change'],
      }),
  ),
};

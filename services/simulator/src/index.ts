export { createPublisher, type Publisher, type PublisherOptions, type PublisherStats } from './publisher.ts';
export { publishMessages, type PlaybackOptions } from './playback.ts';
export { encodeMessage, shiftMessages, toBatchEntry, toBatches, type SimulatedMessage } from './messages.ts';
export {
  MachineScript,
  type IdentifierSessionTruth,
  type MachineScriptOptions,
  type MachineTruth,
  type UsageSessionTruth,
} from './machine-script.ts';
export {
  DEFAULT_MIX,
  DEMO_YARD,
  badMessageCases,
  fleetTraffic,
  randomSource,
  readingPayload,
  type BadMessageCase,
  type FleetTrafficOptions,
  type MessageMix,
} from './traffic.ts';
export {
  startSimulator,
  type RunningSimulator,
  type SimulatedDevice,
  type SimulatorOptions,
  type SimulatorStats,
} from './fleet.ts';
export {
  bearingDeg,
  boxAround,
  destination,
  haversineM,
  interpolate,
  pathClear,
  routeAround,
  type Box,
  type LatLon,
} from './geo.ts';
export {
  demoHistory,
  historyBatches,
  startDemoFleet,
  type DemoFleet,
  type DemoFleetDevice,
  type DemoFleetOptions,
  type DemoHistory,
  type DemoHistoryOptions,
  type DemoMachineEnd,
} from './demo-fleet.ts';
export { avoidBoxes, pickWaypoint, zoneCrossing, type ZoneCrossing } from './yard.ts';

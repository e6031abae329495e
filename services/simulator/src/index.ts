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
export { startSimulator, type RunningSimulator, type SimulatedDevice, type SimulatorOptions, type SimulatorStats } from './fleet.ts';
export { bearingDeg, destination, haversineM, interpolate, type LatLon } from './geo.ts';

export * from './types.ts';
export { haversineMeters, isInsideZone } from './geo.ts';
export {
  CARRY_VERSION,
  carrySchema,
  derive,
  emptyCarry,
  isCarry,
  replaceFromOf,
  stableId,
  type Carry,
  type DeriveInput,
  type DeriveResult,
} from './derive.ts';

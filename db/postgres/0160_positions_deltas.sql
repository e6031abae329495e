-- Up Migration
-- PostgreSQL mode only. Positions gold (positions_1min, positions_15min) is kept by
-- differences in the ingest transaction that writes the fixes to silver
-- (services/ingest/src/storage/positions.ts); the invalidation log and the worker's
-- refresh remain for replays, rewritten silver and rebuilds.
--
-- Differences must give the rows the definition gives, so last() has to be deterministic:
-- between values with the same time it kept the one read last, which depends on the order
-- a scan meets the rows (two devices of one asset with a fix at the same instant). Now the
-- greater value wins a tie, whatever the order.
CREATE OR REPLACE FUNCTION gantry_last_step(state gantry_last_state, value double precision, at timestamptz)
RETURNS gantry_last_state
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN at IS NULL THEN state
    WHEN state IS NULL OR at > (state).at OR (at = (state).at AND value > (state).value)
      THEN ROW(value, at)::gantry_last_state
    ELSE state
  END
$$;

-- Positions gold built before this may hold a tie the other way: rebuilt once, whole.
UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('positions_1min', 'positions_15min');

-- Down Migration
CREATE OR REPLACE FUNCTION gantry_last_step(state gantry_last_state, value double precision, at timestamptz)
RETURNS gantry_last_state
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN at IS NULL THEN state
    WHEN state IS NULL OR at >= (state).at THEN ROW(value, at)::gantry_last_state
    ELSE state
  END
$$;
UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('positions_1min', 'positions_15min');

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

-- Positions gold built before this is left as it is: it may hold such a tie the other way
-- (two devices of one asset with a fix at the same instant), and a rebuild here would hold
-- every ingest batch with a fix until it finished (the rebuild takes the positions lock
-- exclusively), minutes on a long history. `gantry` rebuilds a relation whose definition
-- changes; this is a rule for ties, not a new definition.

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

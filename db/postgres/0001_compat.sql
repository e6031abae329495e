-- Up Migration
-- PostgreSQL mode only. The gold definitions in db/gold are written once, in the
-- TimescaleDB dialect; these functions give plain PostgreSQL the same meaning so the
-- very same SQL runs in both modes.

-- time_bucket(width, ts): the start of the bucket holding ts, aligned like
-- TimescaleDB's default origin (Monday 2000-01-03 00:00 UTC).
CREATE FUNCTION time_bucket(bucket_width interval, ts timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
  SELECT date_bin(bucket_width, ts, TIMESTAMPTZ '2000-01-03 00:00:00+00')
$$;

-- last(value, time): the value with the greatest time, as TimescaleDB's last().
CREATE TYPE gantry_last_state AS (value double precision, at timestamptz);

CREATE FUNCTION gantry_last_step(state gantry_last_state, value double precision, at timestamptz)
RETURNS gantry_last_state
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN at IS NULL THEN state
    WHEN state IS NULL OR at >= (state).at THEN ROW(value, at)::gantry_last_state
    ELSE state
  END
$$;

CREATE FUNCTION gantry_last_final(state gantry_last_state) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT (state).value $$;

CREATE AGGREGATE last(double precision, timestamptz) (
  SFUNC = gantry_last_step,
  STYPE = gantry_last_state,
  FINALFUNC = gantry_last_final
);

-- Down Migration
DROP AGGREGATE IF EXISTS last(double precision, timestamptz);
DROP FUNCTION IF EXISTS gantry_last_final(gantry_last_state), gantry_last_step(gantry_last_state, double precision, timestamptz),
  time_bucket(interval, timestamptz);
DROP TYPE IF EXISTS gantry_last_state;

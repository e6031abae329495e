-- Up Migration
-- Rate-limit counters shared by every API process (rate-limiter-flexible's PostgreSQL
-- store: key, points used in the window, window end in epoch milliseconds). Unlogged:
-- counters live for seconds, so losing them in a crash costs nothing and skipping the
-- WAL keeps the per-request upsert cheap.
CREATE UNLOGGED TABLE rate_limits (
  key    varchar(255) PRIMARY KEY,
  points integer NOT NULL DEFAULT 0,
  expire bigint
);

-- Down Migration
DROP TABLE IF EXISTS rate_limits;

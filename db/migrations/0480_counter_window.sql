-- Up Migration
-- Data quality's default range is the last 24 hours: the open hour and the 24 before it.
-- Summing device_counts_hourly over it reads 25 rows per device (250,000 at 10,000
-- devices) on every request, though 24 of those hours are closed and hardly change. This
-- keeps their sums per device: device_counts_window holds, for every device with traffic
-- in them, the sums of the columns data quality reads over the 24 whole hours
-- [window_start, window_start + 24 h), and device_counts_window_start says which hours
-- those are (one row; none until the worker first builds the window). A request for the
-- default range then reads one window row and one open-hour row per device.
--
-- Kept exact (packages/db/src/counter-window.ts): ingest adds a batch's counts for hours
-- inside the window (late readings, a commit just after the hour turned) in the batch's
-- transaction; the worker moves the window on when an hour closes (the hour that left is
-- taken away, the hour that closed is added). Both take one advisory lock (ingest its
-- shared side, before it writes counter rows; the worker the exclusive side), so a batch
-- is counted in the window either by the worker's move or by itself, never twice.
CREATE TABLE device_counts_window_start (
  one_row      boolean PRIMARY KEY DEFAULT true CHECK (one_row),
  window_start timestamptz NOT NULL
);

CREATE TABLE device_counts_window (
  tenant_id           uuid NOT NULL,
  device_id           uuid NOT NULL,
  gps_messages        bigint NOT NULL DEFAULT 0,
  adcin_messages      bigint NOT NULL DEFAULT 0,
  hourmeter_messages  bigint NOT NULL DEFAULT 0,
  imu_messages        bigint NOT NULL DEFAULT 0,
  identifier_messages bigint NOT NULL DEFAULT 0,
  heartbeat_messages  bigint NOT NULL DEFAULT 0,
  batch_messages      bigint NOT NULL DEFAULT 0,
  timed_messages      bigint NOT NULL DEFAULT 0,
  delayed_messages    bigint NOT NULL DEFAULT 0,
  gps_readings        bigint NOT NULL DEFAULT 0,
  adcin_readings      bigint NOT NULL DEFAULT 0,
  hourmeter_readings  bigint NOT NULL DEFAULT 0,
  imu_readings        bigint NOT NULL DEFAULT 0,
  identifier_readings bigint NOT NULL DEFAULT 0,
  heartbeat_readings  bigint NOT NULL DEFAULT 0,
  valid_gps_fixes     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, device_id)
) WITH (fillfactor = 70);

-- The counters by tenant and hour. Until now a range of hours was found by reading every
-- counter row of the table (its only index leads with the device): a cost that grew with
-- the history kept, not with the range asked for. The window's moves and rebuilds read
-- one hour of every tenant through it too.
CREATE INDEX device_counts_hourly_tenant_bucket_idx ON device_counts_hourly (tenant_id, bucket);
CREATE INDEX message_errors_hourly_tenant_bucket_idx ON message_errors_hourly (tenant_id, bucket);

-- Down Migration
DROP INDEX IF EXISTS device_counts_hourly_tenant_bucket_idx, message_errors_hourly_tenant_bucket_idx;
DROP TABLE IF EXISTS device_counts_window, device_counts_window_start;

-- Up Migration
-- Derivation bookkeeping (docs/derivation.md): hourly snapshots of each device's
-- derivation state, so late data restarts from the hour before it instead of from the
-- beginning, and the time at which a device's open sessions fall due to time out.

CREATE TABLE derivation_checkpoints (
  device_id uuid NOT NULL,
  -- Readings with ts >= at were not yet consumed when the snapshot was taken.
  at        timestamptz NOT NULL,
  carry     jsonb NOT NULL,
  PRIMARY KEY (device_id, at)
);

ALTER TABLE derivation_state ADD COLUMN recheck_at timestamptz;
CREATE INDEX derivation_state_recheck_idx ON derivation_state (recheck_at) WHERE recheck_at IS NOT NULL;

CREATE INDEX gold_invalidations_subject_idx ON gold_invalidations (relation, subject_id, bucket_start);

-- Hourmeter increments are spread over the time between two readings, so an hour gets
-- exactly its share: fractional seconds.
ALTER TABLE telemetry_segments ALTER COLUMN hourmeter_delta TYPE double precision;

-- Down Migration
ALTER TABLE telemetry_segments ALTER COLUMN hourmeter_delta TYPE bigint USING round(hourmeter_delta);
DROP INDEX IF EXISTS gold_invalidations_subject_idx;
DROP INDEX IF EXISTS derivation_state_recheck_idx;
ALTER TABLE derivation_state DROP COLUMN IF EXISTS recheck_at;
DROP TABLE IF EXISTS derivation_checkpoints;

-- Up Migration
-- Workers claim dirty devices with session advisory locks instead of holding the queue
-- rows locked for a whole derivation, so ingest marking a device never waits for one
-- (docs/derivation.md). A claim resets new_from; marks arriving while the device is
-- derived lower it, and the derivation's commit turns it into the next dirty_from.
ALTER TABLE derivation_queue ADD COLUMN new_from timestamptz NOT NULL DEFAULT 'infinity';

-- Down Migration
ALTER TABLE derivation_queue DROP COLUMN IF EXISTS new_from;

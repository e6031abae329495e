-- Up Migration
-- PostgreSQL mode only (TimescaleDB mode stores segments in hypertable chunks, whose
-- storage options are left alone). The worker overwrites each device's open segment in
-- place on nearly every derivation (end, seconds, distance, counters; services/worker/
-- src/features/derivation/repository.ts, deleteReplacedSegments and insertSegments).
-- None of those columns is indexed — the indexes hold device, asset, tenant and start,
-- which a segment keeps — so the update can be HOT (no new index entries, the old
-- version pruned within its page) as long as its page has room for the new version.
-- Pages filled to 90 % keep room for about six versions of these ~130-byte rows. Closed
-- segments are never updated, so on their pages the room goes unused (the table is about
-- 10 % larger; docs/derivation.md has the figures). Existing pages keep their fill until
-- rewritten.
ALTER TABLE telemetry_segments SET (fillfactor = 90);

-- Down Migration
ALTER TABLE telemetry_segments RESET (fillfactor);

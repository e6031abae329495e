-- Up Migration
-- The worker updates each device's open usage and identifier session in place on nearly
-- every derivation (end, durations, counters; services/worker/src/features/derivation/
-- repository.ts, writeSessionsSql). None of the columns such an update changes is
-- indexed — the indexes hold id, tenant, device, asset, start and, for identifier
-- sessions, the identifier, which a session keeps — so the update can be HOT (no new
-- index entries, the old version pruned within its page) as long as its page has room
-- for the new version. Pages filled to 80 % keep that room: about eight row versions of
-- these ~200-byte rows. Closed sessions are never updated, so their pages carry the
-- unused fifth for nothing (the tables are small beside readings and segments). The
-- session tables are plain tables in both storage modes. Existing pages keep their fill
-- until rewritten; new ones follow the setting.
ALTER TABLE usage_sessions SET (fillfactor = 80);
ALTER TABLE identifier_sessions SET (fillfactor = 80);

-- Down Migration
ALTER TABLE usage_sessions RESET (fillfactor);
ALTER TABLE identifier_sessions RESET (fillfactor);

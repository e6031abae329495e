-- Up Migration
-- The session lists page newest first by (start_ts DESC, id DESC) through
-- *_tenant_order_idx. The older (tenant_id, start_ts DESC) indexes are a prefix of those
-- (whatever they served, those serve too), yet the planner preferred them for being
-- smaller: it then read every session sharing the page's last start time and sorted
-- them by id (sessions starting together — 1,001 in bench:present's fleet — made a
-- 100-row page read all of them and probe each one's asset). Without them a page reads
-- its rows and stops; the worker, which deletes and re-inserts open sessions on each
-- derivation, writes one index entry less per row.
DROP INDEX IF EXISTS usage_sessions_tenant_time_idx;
DROP INDEX IF EXISTS identifier_sessions_tenant_time_idx;

-- Down Migration
CREATE INDEX IF NOT EXISTS usage_sessions_tenant_time_idx ON usage_sessions (tenant_id, start_ts DESC);
CREATE INDEX IF NOT EXISTS identifier_sessions_tenant_time_idx ON identifier_sessions (tenant_id, start_ts DESC);

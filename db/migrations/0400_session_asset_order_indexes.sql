-- Up Migration
-- One asset's session list (services/api/src/features/telemetry/sessions.repository.ts)
-- filters by the asset alone and pages by start_ts DESC, id DESC: an index in that exact
-- order reads the page's rows and stops, and it is the only index that fits the
-- statement, so the plan does not depend on statistics (none exist right after a bulk
-- upload, before autovacuum has analysed the table). It replaces the (asset_id, start_ts
-- DESC) indexes, which serve nothing it does not.
CREATE INDEX usage_sessions_asset_order_idx ON usage_sessions (asset_id, start_ts DESC, id DESC);
DROP INDEX IF EXISTS usage_sessions_asset_time_idx;
CREATE INDEX identifier_sessions_asset_order_idx ON identifier_sessions (asset_id, start_ts DESC, id DESC);
DROP INDEX IF EXISTS identifier_sessions_asset_time_idx;

-- Down Migration
CREATE INDEX usage_sessions_asset_time_idx ON usage_sessions (asset_id, start_ts DESC);
DROP INDEX usage_sessions_asset_order_idx;
CREATE INDEX identifier_sessions_asset_time_idx ON identifier_sessions (asset_id, start_ts DESC);
DROP INDEX identifier_sessions_asset_order_idx;

-- Up Migration
-- Indexes for the telemetry API's lists and exports (docs/telemetry-api.md). Each list
-- pages in a total order; an index in exactly that order lets a page (or a 50,000-row
-- export chunk) be read without sorting everything before it.

-- Usage and identifier sessions: newest first, ties by id.
CREATE INDEX usage_sessions_tenant_order_idx ON usage_sessions (tenant_id, start_ts DESC, id DESC);
CREATE INDEX identifier_sessions_tenant_order_idx ON identifier_sessions (tenant_id, start_ts DESC, id DESC);
-- Per-asset session lists.
CREATE INDEX identifier_sessions_asset_time_idx ON identifier_sessions (asset_id, start_ts DESC);
-- Geofence alerts: newest first, ties by id.
CREATE INDEX geofence_alerts_tenant_order_idx ON geofence_alerts (tenant_id, created_at DESC, id DESC);
-- Active alerts and memberships per geofence (the counts of the geofence list).
CREATE INDEX geofence_alerts_active_idx ON geofence_alerts (geofence_id) WHERE is_active;
CREATE INDEX geofence_memberships_inside_idx ON geofence_memberships (geofence_id) WHERE inside;

-- Down Migration
DROP INDEX IF EXISTS geofence_memberships_inside_idx;
DROP INDEX IF EXISTS geofence_alerts_active_idx;
DROP INDEX IF EXISTS geofence_alerts_tenant_order_idx;
DROP INDEX IF EXISTS identifier_sessions_asset_time_idx;
DROP INDEX IF EXISTS identifier_sessions_tenant_order_idx;
DROP INDEX IF EXISTS usage_sessions_tenant_order_idx;

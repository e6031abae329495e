-- Up Migration
-- Service requests (docs/service-requests.md): the list filtered by status (the common
-- "open requests" view) reads an index instead of every request of the tenant.

CREATE INDEX service_requests_tenant_status_idx ON service_requests (tenant_id, status, created_at DESC);

-- Down Migration
DROP INDEX IF EXISTS service_requests_tenant_status_idx;

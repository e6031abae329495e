-- Up Migration
-- Bronze at a fraction of its former cost (docs/ingest.md, "Cost per message"). Measured
-- before this change, a bronze row per message with its device index was 40 % of ingest's
-- WAL and a third of its statement time.
--
-- * device_message_batches: the messages of one ingest batch that were stored (accepted or
--   duplicate), together in one row: one array per field, compressed by TOAST (lz4 where the
--   server has it, else pglz), no
--   index entry per message. Device, tenant and asset are a small per-batch dictionary
--   (devices[device_index]); device key and message type are parts of the topic; status
--   follows from reading_count (> 0 accepted, else duplicate); payloads are valid UTF-8
--   JSON without NUL (the parse steps guarantee it), kept as text.
-- * device_message_rows: messages kept one row each — rejected or partial on receipt
--   (data quality's recent errors list them, by tenant and time), and any row written
--   through the device_messages view. A later replay updates them in place.
-- * device_messages: the view of every message, one row each, as the table was.
--   Message ids: batch id × 2^20 + the message's position in its batch, so ids of one
--   batch's rows and its array entries interleave in receive order.

CREATE SEQUENCE device_message_batch_ids;

CREATE TABLE device_message_batches (
  id             bigint NOT NULL DEFAULT nextval('device_message_batch_ids'),
  received_from  timestamptz NOT NULL,
  received_to    timestamptz NOT NULL,
  devices        uuid[] NOT NULL,
  device_tenants uuid[] NOT NULL,
  device_assets  uuid[] NOT NULL,
  positions      integer[] NOT NULL,
  received_at    timestamptz[] NOT NULL,
  topic          text[] NOT NULL,
  device_index   integer[] NOT NULL,
  device_ts      timestamptz[] NOT NULL,
  reading_count  integer[] NOT NULL,
  payload        text[] NOT NULL
);

-- lz4 compresses and decompresses several times faster than pglz, but not every build has
-- it (the embedded PostgreSQL of the zero-setup start has not): use it where it exists.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    EXECUTE 'ALTER TABLE device_message_batches ALTER COLUMN devices SET COMPRESSION lz4, ALTER COLUMN device_tenants SET COMPRESSION lz4, ALTER COLUMN device_assets SET COMPRESSION lz4, ALTER COLUMN positions SET COMPRESSION lz4, ALTER COLUMN received_at SET COMPRESSION lz4, ALTER COLUMN topic SET COMPRESSION lz4, ALTER COLUMN device_index SET COMPRESSION lz4, ALTER COLUMN device_ts SET COMPRESSION lz4, ALTER COLUMN reading_count SET COMPRESSION lz4, ALTER COLUMN payload SET COMPRESSION lz4';
  END IF;
END $$;
ALTER SEQUENCE device_message_batch_ids OWNED BY device_message_batches.id;
-- One entry per batch: retention, replay by receive time.
CREATE INDEX device_message_batches_received_idx ON device_message_batches (received_from);

CREATE TABLE device_message_rows (
  id            bigint NOT NULL DEFAULT nextval('device_message_batch_ids') * 1048576,
  received_at   timestamptz NOT NULL,
  topic         text NOT NULL,
  device_key    text,
  device_id     uuid,
  tenant_id     uuid,
  asset_id      uuid,
  message_type  text,
  status        text NOT NULL CHECK (status IN ('accepted', 'rejected', 'duplicate', 'partial')),
  error         text,
  error_detail  text,
  device_ts     timestamptz,
  reading_count integer NOT NULL DEFAULT 0,
  payload_size  integer NOT NULL,
  payload       bytea NOT NULL
);
CREATE INDEX device_message_rows_received_idx ON device_message_rows USING brin (received_at);
-- Data quality's recent errors: newest first per tenant.
CREATE INDEX device_message_rows_tenant_errors_idx ON device_message_rows (tenant_id, received_at DESC)
  WHERE status IN ('rejected', 'partial');

-- What bronze held so far stays, one row each.
INSERT INTO device_message_rows (id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type,
  status, error, error_detail, device_ts, reading_count, payload_size, payload)
SELECT id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type,
  status, error, error_detail, device_ts, reading_count, payload_size, payload
FROM device_messages;
SELECT setval('device_message_batch_ids', coalesce((SELECT max(id) / 1048576 + 1 FROM device_message_rows), 1));
DROP TABLE device_messages;

CREATE VIEW device_messages AS
SELECT b.id * 1048576 + m.position AS id,
       m.received_at,
       m.topic,
       split_part(m.topic, '/', 4) AS device_key,
       b.devices[m.device_index] AS device_id,
       b.device_tenants[m.device_index] AS tenant_id,
       b.device_assets[m.device_index] AS asset_id,
       split_part(m.topic, '/', 5) AS message_type,
       CASE WHEN m.reading_count > 0 THEN 'accepted' ELSE 'duplicate' END AS status,
       NULL::text AS error,
       NULL::text AS error_detail,
       m.device_ts,
       m.reading_count,
       octet_length(m.payload) AS payload_size,
       convert_to(m.payload, 'UTF8') AS payload
  FROM device_message_batches b
 CROSS JOIN LATERAL unnest(b.positions, b.received_at, b.topic, b.device_index, b.device_ts, b.reading_count, b.payload)
       AS m(position, received_at, topic, device_index, device_ts, reading_count, payload)
UNION ALL
SELECT id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, error_detail,
       device_ts, reading_count, payload_size, payload
  FROM device_message_rows;

-- Rows written through the view (fixtures, manual repairs) are kept one row each.
CREATE FUNCTION device_messages_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO device_message_rows (id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type,
    status, error, error_detail, device_ts, reading_count, payload_size, payload)
  VALUES (coalesce(NEW.id, nextval('device_message_batch_ids') * 1048576), NEW.received_at, NEW.topic, NEW.device_key,
    NEW.device_id, NEW.tenant_id, NEW.asset_id, NEW.message_type, NEW.status, NEW.error, NEW.error_detail, NEW.device_ts,
    coalesce(NEW.reading_count, 0), NEW.payload_size, NEW.payload);
  RETURN NEW;
END $$;
CREATE TRIGGER device_messages_insert INSTEAD OF INSERT ON device_messages
  FOR EACH ROW EXECUTE FUNCTION device_messages_insert();

-- Silver keeps the indexes a query uses (docs/ingest.md names each):
-- * the key (device_id, ts, type): deduplication, and the worker's loadReadings (one
--   device from a time on, in (ts, type) order), and reading_counts_hourly by device and
--   time — so the separate (device_id, ts) index goes;
-- * (asset_id, ts) for valid GPS fixes only: the positions_1min refresh reads nothing else.
ALTER TABLE telemetry_readings DROP CONSTRAINT telemetry_readings_pkey;
ALTER TABLE telemetry_readings ADD CONSTRAINT telemetry_readings_pkey PRIMARY KEY (device_id, ts, type);
DROP INDEX IF EXISTS telemetry_readings_device_ts_idx;
DROP INDEX IF EXISTS telemetry_readings_asset_ts_idx;
CREATE INDEX telemetry_readings_positions_idx ON telemetry_readings (asset_id, ts) WHERE type = 'gps' AND gps_valid;

-- Down Migration
DROP INDEX IF EXISTS telemetry_readings_positions_idx;
CREATE INDEX telemetry_readings_asset_ts_idx ON telemetry_readings (asset_id, ts);
CREATE INDEX telemetry_readings_device_ts_idx ON telemetry_readings (device_id, ts);
ALTER TABLE telemetry_readings DROP CONSTRAINT telemetry_readings_pkey;
ALTER TABLE telemetry_readings ADD CONSTRAINT telemetry_readings_pkey PRIMARY KEY (device_id, type, ts);
DROP TRIGGER IF EXISTS device_messages_insert ON device_messages;
DROP FUNCTION IF EXISTS device_messages_insert();
CREATE TABLE device_messages_restored AS SELECT * FROM device_messages;
DROP VIEW device_messages;
ALTER TABLE device_messages_restored RENAME TO device_messages;
DROP TABLE device_message_rows, device_message_batches;

-- Device ids seen on the broker that no tenant has registered, so an operator can find
-- newly installed trackers and register them. Kept by ingest in the transaction of the
-- batch that saw them; deployment-wide (such messages have no tenant). Bounded: ingest
-- keeps at most a fixed number of ids (1000), evicting the least recently seen, so a
-- flood of random ids cannot grow it (docs/getting-started.md, "Devices nobody registered").
CREATE TABLE unknown_devices (
  device_key      text PRIMARY KEY CHECK (device_key ~ '^[A-Za-z0-9._:-]{1,64}$'),
  first_seen_at   timestamptz NOT NULL,
  last_seen_at    timestamptz NOT NULL,
  message_count   bigint NOT NULL,
  -- The latest message: its topic and the start of its payload (raw bytes, clipped).
  sample_topic    text NOT NULL,
  sample_payload  bytea NOT NULL,
  sample_size     integer NOT NULL
);
CREATE INDEX unknown_devices_last_seen_idx ON unknown_devices (last_seen_at DESC, device_key);

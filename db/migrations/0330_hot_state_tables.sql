-- The small tables every ingest batch and every derivation rewrites, a row per device:
-- device_state (each batch updates the state of every device it holds), the derivation
-- queue and derivation_state. At the default fillfactor their pages are full, so an
-- update cannot stay on its page: it writes a new index entry in every index and leaves
-- a dead row behind that only a vacuum removes. With 1,000 devices sending every second,
-- device_state grew to 3,000 pages for 1,000 rows in a minute (0.9 % of the updates HOT)
-- and each lookup of a device's state read ~21 buffers.
--
-- Room on each page lets updates stay on it (HOT: no new index entries; the page prunes
-- its own dead rows), and vacuuming these tables after a fixed number of dead rows, not a
-- share of a table this small, keeps up with the rest. The tables are a row per device,
-- so the space given away is small. ALTER ... SET only applies to pages written from now
-- on; existing rows move to such pages as they are updated.
ALTER TABLE device_state SET (
  fillfactor = 25,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE derivation_queue SET (
  fillfactor = 50,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE derivation_state SET (
  fillfactor = 50,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 5000,
  autovacuum_vacuum_cost_delay = 0
);

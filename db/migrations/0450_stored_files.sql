-- Up Migration
-- File contents in the database (GANTRY_FILE_STORAGE=database): every API instance
-- reads what any other wrote, and the bytes are replicated and backed up with the rest.
-- A file is a row here plus its bytes in chunks of 64 KiB, written as the upload
-- arrives, so neither side ever holds a whole file. Chunk rows rather than large
-- objects: they cascade away with their file, are dumped and restored with the table
-- (pg_dump -t, logical replication) and need no lo_unlink or vacuumlo.
CREATE TABLE stored_files (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- The storage key (`<tenant>/<request>/<file>`); unique among complete files only:
  -- an upload in progress (completed_at null) is invisible until it completes.
  key          text NOT NULL,
  size_bytes   bigint NOT NULL DEFAULT 0,
  sha256       text,
  started_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE UNIQUE INDEX stored_files_key_idx ON stored_files (key) WHERE completed_at IS NOT NULL;
CREATE INDEX stored_files_incomplete_idx ON stored_files (started_at) WHERE completed_at IS NULL;

CREATE TABLE stored_file_chunks (
  file_id uuid NOT NULL REFERENCES stored_files (id) ON DELETE CASCADE,
  seq     integer NOT NULL,
  bytes   bytea NOT NULL,
  PRIMARY KEY (file_id, seq)
);
-- Uploads are mostly compressed already (photos, PDFs, videos): TOAST out of line
-- without trying to compress them again.
ALTER TABLE stored_file_chunks ALTER COLUMN bytes SET STORAGE EXTERNAL;

-- Down Migration
DROP TABLE IF EXISTS stored_file_chunks, stored_files;

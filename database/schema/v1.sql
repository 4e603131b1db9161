-- Kiln tuning database, schema version 1 (Kiln 0.1.0), frozen.
-- Kept verbatim so that tests can create a version-1 file and check that
-- opening it read-write migrates it. Never edit: add a migration instead.
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  key_hash TEXT NOT NULL UNIQUE,
  canonical_json TEXT NOT NULL,
  op_summary TEXT NOT NULL DEFAULT '',
  shapes TEXT NOT NULL DEFAULT ''
);
CREATE TABLE records (
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads (id) ON DELETE CASCADE,
  target TEXT NOT NULL,
  trace_json TEXT NOT NULL,
  trace_hash TEXT NOT NULL,
  latencies_json TEXT,
  mean_latency REAL,
  error_kind TEXT,
  error_message TEXT,
  metadata_json TEXT NOT NULL DEFAULT '{}',
  kiln_version TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  UNIQUE (workload_id, target, trace_hash),
  CHECK ((mean_latency IS NULL) <> (error_kind IS NULL))
);
CREATE INDEX records_best_by_target ON records (workload_id, target, mean_latency)
  WHERE mean_latency IS NOT NULL;

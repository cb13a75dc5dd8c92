-- Schema of the locker PostgreSQL backend (package github.com/distlock/locker/postgres).
--
-- The backend runs this file on first use, under a transaction-scoped advisory
-- lock so that many processes starting at once do not race, unless the table and
-- the sequence already exist. Teams that migrate schemas themselves can run it
-- in a migration instead, replacing the three placeholders by quoted identifiers
-- (the defaults are shown on the right) and granting the application role
-- SELECT, INSERT, UPDATE on the table and USAGE, SELECT, UPDATE on the sequence:
--
--   {{schema}}    "public"
--   {{table}}     "locker_locks"
--   {{sequence}}  "locker_locks_token"     (always the table name + "_token")

-- One row per key ever locked. A lock is the row lock that SELECT … FOR UPDATE
-- takes in the holder's open transaction; the row itself holds no state, so a
-- holder that dies leaves nothing to clean up. Keys are bytea because the key
-- may contain a NUL byte (the namespace separator), which text cannot hold;
-- bytea keeps every distinct key distinct.
--
-- Rows are never deleted by the backend. Unheld rows may be deleted at any time
-- (tokens do not live in them), e.g.:
--   DELETE FROM {{schema}}.{{table}}
--    WHERE key IN (SELECT key FROM {{schema}}.{{table}} FOR UPDATE SKIP LOCKED);
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}} (
    key bytea PRIMARY KEY
);

-- Fencing tokens, shared by all keys of the table. NO CYCLE: a token never
-- wraps around. CACHE 1: no backend holds values that another would overtake.
-- The backend raises it to the server clock in microseconds (never lowers it)
-- after a server restart; see the package documentation.
CREATE SEQUENCE IF NOT EXISTS {{schema}}.{{sequence}}
    AS bigint MINVALUE 1 NO CYCLE CACHE 1;

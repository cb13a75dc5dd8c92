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

-- One row per key ever locked (the lock row). A lock is the row lock that SELECT … FOR UPDATE
-- takes in the holder's open transaction; the row itself holds no state, so a
-- holder that dies leaves nothing to clean up. Keys are bytea because the key
-- may contain a NUL byte (the namespace separator), which text cannot hold;
-- bytea keeps every distinct key distinct.
--
-- Rows are never deleted by the backend. Unheld lock rows may be deleted at any
-- time (tokens do not live in them), e.g.:
--   DELETE FROM {{schema}}.{{table}}
--    WHERE key IN (SELECT key FROM {{schema}}.{{table}} WHERE key < '\xff'
--                   FOR UPDATE SKIP LOCKED);
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}} (
    key bytea PRIMARY KEY
);

-- Holder records (since the inspection release; added to tables made before).
-- A holder's own transaction never commits, so what it writes there nobody
-- sees: a value the holder publishes (and a label too long for
-- application_name) is written, committed, by another connection into a
-- second row, keyed '\xff' || key (no lock key starts with 0xff, which is not
-- UTF-8). The record is the current holder's only while its token is the one
-- the holder's session shows; stale records are ignored, and may be deleted
-- whenever the key is free.
ALTER TABLE {{schema}}.{{table}}
    ADD COLUMN IF NOT EXISTS owner bytea,
    ADD COLUMN IF NOT EXISTS token bigint,
    ADD COLUMN IF NOT EXISTS label text,
    ADD COLUMN IF NOT EXISTS value text;

-- N-permit locks and minimum holds (since the permits release; added to
-- tables made before). permits is the limit of a key used as an N-permit
-- lock, on its lock row, changed only while nobody holds or waits for it;
-- its permits are rows keyed '\xfe' || key || '\x00' || the permit's number
-- (two bytes), each taken FOR UPDATE by its holder (who holds the lock row
-- FOR SHARE). held_until, on a holder record, is the end of the holder's
-- minimum hold: until then the lock (or permit) is not granted again.
ALTER TABLE {{schema}}.{{table}}
    ADD COLUMN IF NOT EXISTS permits integer,
    ADD COLUMN IF NOT EXISTS held_until timestamptz;

-- Fencing tokens, shared by all keys of the table. NO CYCLE: a token never
-- wraps around. CACHE 1: no backend holds values that another would overtake.
-- The backend raises it to the server clock in microseconds (never lowers it)
-- after a server restart; see the package documentation.
CREATE SEQUENCE IF NOT EXISTS {{schema}}.{{sequence}}
    AS bigint MINVALUE 1 NO CYCLE CACHE 1;

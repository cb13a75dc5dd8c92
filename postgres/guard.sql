-- Schema of the SQL fencing guard of the locker PostgreSQL backend
-- (postgres.Guard). The guard runs this file on first use under a
-- transaction-scoped advisory lock unless the table exists. To migrate it
-- yourself, replace the placeholders by quoted identifiers (defaults on the
-- right) and grant the application role SELECT, INSERT, UPDATE on the table:
--
--   {{schema}}  "public"
--   {{table}}   "locker_fences"

-- The highest fencing token admitted per resource. Admit upserts the row only
-- when the stored token is not larger than the new one, so a write carrying a
-- stale token finds zero rows and is refused; inside the caller's transaction
-- the row lock also serializes concurrent writers until that transaction ends.
CREATE TABLE IF NOT EXISTS {{schema}}.{{table}} (
    resource text PRIMARY KEY,
    token bigint NOT NULL CHECK (token > 0)
);

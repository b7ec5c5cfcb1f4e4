-- 0004: trigram indexes for search (POST /v1/search, GET /v1/messages?q=).
-- Search promises a case-insensitive SUBSTRING of subject, body or from;
-- pg_trgm's GIN operator class lets "col ILIKE '%q%'" use an index for
-- queries of three or more characters, with exactly ILIKE's semantics.
-- Shorter patterns fall back to a scan, bounded by the search timeout.
--
-- pg_trgm ships with PostgreSQL (the contrib modules: in the postgres Docker
-- images, and in Debian's postgresql-NN package) and is a trusted extension
-- since PostgreSQL 13, so a database owner may create it.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX messages_subject_trgm_idx ON messages USING gin (subject gin_trgm_ops);
CREATE INDEX messages_body_text_trgm_idx ON messages USING gin (body_text gin_trgm_ops);
CREATE INDEX messages_from_address_trgm_idx ON messages USING gin (from_address gin_trgm_ops);

-- One send's database work as the server does it on PostgreSQL (a new
-- thread and its message in one statement, then the outcome), for pgbench:
-- the ceiling of server sends/s when nothing but the database costs.
-- Used by scripts/bench-server.sh; needs the schema and an inbox 'bench'.
WITH t AS (INSERT INTO threads (id, inbox_id, subject, summary, participant_hash, last_message_at, created_at)
  VALUES (gen_random_uuid()::text, 'bench', 'Load test', NULL, 'h', now(), now()) RETURNING id)
INSERT INTO messages (id, thread_id, inbox_id, direction, status, error, provider_message_id,
  message_id_header, in_reply_to, references_header, subject, from_address, to_addresses,
  cc_addresses, bcc_addresses, reply_to_addresses, labels, metadata, body_text, body_html, size,
  created_at, sent_at)
SELECT gen_random_uuid()::text, t.id, 'bench', 'outbound', 'sending', NULL, NULL, '<x@bench.test>', NULL,
  '[]', 'Load test', 'bench@bench.test', '["load@loadtest.test"]', '[]', '[]', '[]', '[]', '{}',
  'A message from **nornweave-load**.', '<p>A message from <strong>nornweave-load</strong>.</p>', 90,
  now(), NULL FROM t RETURNING id AS mid \gset
UPDATE messages SET status = 'sent', provider_message_id = '<x@bench.test>', error = NULL, sent_at = now()
  WHERE id = :mid;

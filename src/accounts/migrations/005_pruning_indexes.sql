-- What the periodic prune (src/accounts/pruning.ts) looks for, so each of its
-- bounded DELETE batches finds its rows by index instead of scanning the table.
-- No grant: the service's role owns these tables and may already delete from
-- them (only audit_log has given that right up, and is never pruned).
CREATE INDEX sessions_ended_at_idx ON sessions (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX sessions_last_used_at_idx ON sessions (last_used_at);
CREATE INDEX sessions_created_at_idx ON sessions (created_at);
CREATE INDEX email_tokens_used_at_idx ON email_tokens (used_at) WHERE used_at IS NOT NULL;
CREATE INDEX email_tokens_expires_at_idx ON email_tokens (expires_at);

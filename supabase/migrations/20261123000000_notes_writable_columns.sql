-- A client writes a note's title and body, nothing else: id (identity), user_id (auth.uid()
-- default) and created_at (now()) are the store's. The table-wide INSERT and UPDATE granted by
-- 20260101000000_notes.sql let any signed-in user backdate a note or rewrite its created_at through
-- the REST API (RLS checks rows, not columns). That migration has already run on deployed
-- databases and is checksummed, so the narrowing is a migration of its own.
--
-- Naming another column now fails with 42501 "permission denied for table notes" (403 for a
-- signed-in user), including user_id set to the caller's own id. RLS stays as the second line.
-- SELECT and DELETE stay table-wide; service_role (the administrator, e.g. for imports) keeps
-- every column.

revoke insert, update on public.notes from authenticated;
grant insert (title, body), update (title, body) on public.notes to authenticated;

-- When a note was last changed: the store's to set, like created_at. A trigger sets it on every
-- update, so no client (and no forgotten code path) can leave it stale or write it.
--
-- Existing notes start with updated_at = created_at: they have not been changed since, as far as
-- anyone can tell.

alter table public.notes add column updated_at timestamptz not null default now();
update public.notes set updated_at = created_at;

-- search_path is empty so that no object of the caller's choosing can stand in for now().
create function public.notes_set_updated_at() returns trigger
  language plpgsql
  set search_path = ''
as $$
begin
  new.updated_at := pg_catalog.now();
  return new;
end
$$;

create trigger notes_set_updated_at
  before update on public.notes
  for each row execute function public.notes_set_updated_at();

-- Restated for the new column: a signed-in user may still update title and body only, so naming
-- updated_at is 42501 like id, user_id and created_at. (Revoking the table-wide privilege also
-- revokes every column privilege; the grant then names exactly the two columns.) The insert
-- grant, (title, body) since 20261123000000, leaves updated_at to its default.
revoke update on public.notes from authenticated;
grant update (title, body) on public.notes to authenticated;

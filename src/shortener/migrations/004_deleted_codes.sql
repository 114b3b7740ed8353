-- A deleted link's code is never issued again: a printed QR code or an old
-- message must never lead somewhere new. The delete writes the tombstone in the
-- same statement that removes the row.
CREATE TABLE deleted_codes (
  code text COLLATE "C" PRIMARY KEY,
  deleted_at timestamptz NOT NULL DEFAULT now()
);

-- A link inserted with a tombstoned code fails as a duplicate code does (SQLSTATE
-- 23505, constraint deleted_codes_pkey), so the create's retry picks a new code.
-- AFTER INSERT, not BEFORE: an AFTER trigger runs once the row is in the primary
-- key index, and inserting it there waits for any transaction that is deleting
-- a link with that code. By then that delete (and its tombstone) has committed,
-- and the check, reading with a fresh snapshot, sees the tombstone. A BEFORE
-- trigger could check before the delete committed and let the code through.
CREATE FUNCTION refuse_deleted_code() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM deleted_codes WHERE code = NEW.code) THEN
    RAISE EXCEPTION USING
      ERRCODE = 'unique_violation',
      CONSTRAINT = 'deleted_codes_pkey',
      MESSAGE = 'code belongs to a deleted link and is never issued again';
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER links_refuse_deleted_code AFTER INSERT ON links
  FOR EACH ROW EXECUTE FUNCTION refuse_deleted_code();

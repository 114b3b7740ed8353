-- A link may ask its visitors for a password before it redirects. Only a bcrypt hash is kept
-- (never the password); NULL means the link is open to anyone, as every link before this was.
ALTER TABLE links ADD COLUMN password_hash text CHECK (password_hash LIKE '$2_$%');

-- Custom back-halves: a link's code may also be one chosen by its creator,
-- 3 to 64 characters of letters, digits, "_" and "-". Generated codes stay 7
-- letters and digits; both share the one primary key (and the tombstones of
-- deleted codes), so a chosen code can never equal a live, generated or deleted one.
ALTER TABLE links DROP CONSTRAINT links_code_check;
ALTER TABLE links ADD CONSTRAINT links_code_check CHECK (code ~ '^[A-Za-z0-9_-]{3,64}$');

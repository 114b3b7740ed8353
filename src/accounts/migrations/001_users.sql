-- Users of the accounts service. gen_random_uuid() is built in since PostgreSQL 13.
CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL CHECK (char_length(name) BETWEEN 2 AND 60),
  -- Stored lowercased (the service normalizes); the check keeps it that way for any writer.
  email text NOT NULL CHECK (email = lower(email) AND char_length(email) <= 254),
  password_hash text NOT NULL,
  role text NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Uniqueness is case-insensitive and enforced here, not only by a pre-check:
-- concurrent registrations of one address race past any pre-check.
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

-- The admin listing pages in this order.
CREATE INDEX users_created_at_id_idx ON users (created_at, id);

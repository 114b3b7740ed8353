-- Per-link device rules and an A/B split, as one JSON value on the link row: the redirect's
-- click statement already locks and reads that row, so the rules cost it no extra round trip.
-- Shape (checked by the service, link-rules.ts): {"ios": url, "android": url, "desktop": url,
-- "split": [{"url": url, "percent": 1-99}, ...]}, every key optional; NULL means no rules.
ALTER TABLE links ADD COLUMN rules jsonb;

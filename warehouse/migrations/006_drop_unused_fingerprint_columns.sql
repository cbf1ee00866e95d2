-- 006: ops.month_state keeps only what a refresh writes. The server's per-month fingerprint
-- columns (server_count, server_income, server_expense, server_transfer, server_net,
-- server_category_hash, checked_refresh, checked_at) were filled by an API no refresh called,
-- so they were null in every month while the data dictionary promised the service's figures.
-- The refresh compares fingerprints per year, and per month only where a year differs; it keeps
-- the service's answers in server.transactions_summary and server.spending instead.
ALTER TABLE ops.month_state DROP COLUMN server_count;
ALTER TABLE ops.month_state DROP COLUMN server_income;
ALTER TABLE ops.month_state DROP COLUMN server_expense;
ALTER TABLE ops.month_state DROP COLUMN server_transfer;
ALTER TABLE ops.month_state DROP COLUMN server_net;
ALTER TABLE ops.month_state DROP COLUMN server_category_hash;
ALTER TABLE ops.month_state DROP COLUMN checked_refresh;
ALTER TABLE ops.month_state DROP COLUMN checked_at;
COMMENT ON TABLE ops.month_state IS 'One row per month: when the month was last read whole, why, and by which refresh (what lets a stopped first sync resume and rolling verification choose the months verified longest ago). The service''s fingerprints a refresh compared are in server.transactions_summary and server.spending.';

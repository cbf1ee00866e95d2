-- 013: a refresh's changes counted as what they are (issue 44): rows_changed counts the rows of
-- every entity (accounts, settings, the service's figures too); these count the transactions
-- alone, as the refresh's summary and `centsync status` show them.
ALTER TABLE ops.refreshes ADD COLUMN transactions_new BIGINT;
ALTER TABLE ops.refreshes ADD COLUMN transactions_updated BIGINT;
ALTER TABLE ops.refreshes ADD COLUMN transactions_removed BIGINT;
COMMENT ON COLUMN ops.refreshes.rows_changed IS 'Rows of every entity added, altered or removed in core (accounts, settings and the service''s figures too); the transactions alone are transactions_new, _updated and _removed.';
COMMENT ON COLUMN ops.refreshes.transactions_new IS 'Transactions new to the warehouse in this refresh (NULL: recorded before migration 012, or the refresh stopped early).';
COMMENT ON COLUMN ops.refreshes.transactions_updated IS 'Transactions this refresh found altered on the service (any field the warehouse keeps, or the payload as sent).';
COMMENT ON COLUMN ops.refreshes.transactions_removed IS 'Transactions gone from the service since the last read of their month.';

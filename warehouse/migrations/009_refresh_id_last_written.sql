-- 009: a month replace rewrites only the rows that changed (issue 30), so a row's refresh_id
-- is the refresh that last wrote it, no longer the one that last read its month
-- (ops.month_state.read_refresh says that). The settings, the same: rewritten only when they
-- change. Only comments change here.
COMMENT ON COLUMN core.transactions.refresh_id IS 'The refresh that last wrote this row: added it, or changed it (a column or its payload as sent). A refresh that reads the row unchanged leaves it; when its month was last read is ops.month_state.read_refresh.';
COMMENT ON COLUMN raw.transactions.refresh_id IS 'The refresh that last wrote this payload (as core.transactions.refresh_id).';
COMMENT ON COLUMN core.settings.refresh_id IS 'The refresh that last wrote it: a refresh whose settings did not change leaves it (history.settings has a row for every refresh).';
COMMENT ON COLUMN raw.settings.refresh_id IS 'The refresh that last wrote it (as core.settings.refresh_id).';

-- 015: core.transactions without its PRIMARY KEY index. The key's index (DuckDB's ART) cost
-- about 1.3 CPU-s of a 1,000,000-row first sync's 5 CPU-s of inserts, commits and checkpoints
-- and 80 of the file's 220 MB (bench/ledger_insert.py, docs/benchmarks.md). Ids stay unique:
-- every insert into core.transactions first checks that its ids are distinct and in no row
-- already there (warehouse/ledger.py `_check_new_ids`), and refuses the insert as the key did.
-- DuckDB cannot drop a primary key in place: the table is rebuilt with its rows in their order
-- (the views over it name it, so they read the new table) and its comments set again.
CREATE TABLE core.transactions_015 (
    id              UUID NOT NULL,
    account_id      UUID NOT NULL,
    concept         VARCHAR NOT NULL,
    amount          BIGINT NOT NULL,
    booked_at       DATE NOT NULL,
    month           DATE NOT NULL,
    type            VARCHAR NOT NULL,
    category_id     UUID,
    expense_goal_id UUID,
    created_at      TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ,
    refresh_id      VARCHAR NOT NULL
);
INSERT INTO core.transactions_015 SELECT * FROM core.transactions;
DROP TABLE core.transactions;
ALTER TABLE core.transactions_015 RENAME TO transactions;
COMMENT ON TABLE core.transactions IS 'One row per transaction the service currently has (hidden accounts'' transactions are never sent). A re-read month is replaced as a whole, so edits and deletions show up here. Fields the list endpoint does not send (such as notes) are in raw.transactions.raw only.';
COMMENT ON COLUMN core.transactions.id IS 'The transaction''s id (the service''s UUID); unique: every load checks its ids against the table (no index, for load speed).';
COMMENT ON COLUMN core.transactions.account_id IS 'The account it belongs to (core.accounts.id).';
COMMENT ON COLUMN core.transactions.concept IS 'Merchant or description, 1 to 200 characters.';
COMMENT ON COLUMN core.transactions.amount IS 'Amount in integer cents of the settings currency; negative = money out.';
COMMENT ON COLUMN core.transactions.booked_at IS 'Booking date, in the timezone of the service''s settings (core.settings.timezone).';
COMMENT ON COLUMN core.transactions.month IS 'First day of booked_at''s month: the unit a refresh re-reads and replaces.';
COMMENT ON COLUMN core.transactions.type IS 'expense, income or transfer.';
COMMENT ON COLUMN core.transactions.category_id IS 'The category (core.categories.id); NULL = uncategorised.';
COMMENT ON COLUMN core.transactions.expense_goal_id IS 'The Expense (budget goal) it is assigned to; NULL = unassigned.';
COMMENT ON COLUMN core.transactions.created_at IS 'When the service created it (UTC); NULL if the service did not send it.';
COMMENT ON COLUMN core.transactions.updated_at IS 'When the service last changed it (UTC); NULL if not sent.';
COMMENT ON COLUMN core.transactions.refresh_id IS 'The refresh that last wrote this row: added it, or changed it (a column or its payload as sent). A refresh that reads the row unchanged leaves it; when its month was last read is ops.month_state.read_refresh.';

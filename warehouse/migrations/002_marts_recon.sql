-- 002: the analysts' marts and the reconciliation against the service's own aggregates.
-- Marts are rebuilt whole, in one transaction, by every refresh and by `centsync reconcile`.
-- Money columns end in _cents and keep the service's sign (negative = money out).

CREATE SCHEMA IF NOT EXISTS marts;
CREATE SCHEMA IF NOT EXISTS recon;

-- marts: what analysts query ---------------------------------------------------------------

CREATE TABLE marts.spending_by_month_category (
    month         DATE NOT NULL,
    category_id   UUID,
    category_name VARCHAR NOT NULL,
    amount_cents  BIGINT NOT NULL,
    transactions  BIGINT NOT NULL
);
COMMENT ON TABLE marts.spending_by_month_category IS 'Spending per calendar month of booked_at and category: every expense row, refunds included; transfers and income excluded (the service''s own rule).';
COMMENT ON COLUMN marts.spending_by_month_category.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.spending_by_month_category.category_id IS 'The category; NULL = uncategorised.';
COMMENT ON COLUMN marts.spending_by_month_category.category_name IS 'The name the spending endpoint gives the category (Uncategorized for NULL).';
COMMENT ON COLUMN marts.spending_by_month_category.amount_cents IS 'Sum of the amounts in cents; negative = money out, refunds count positive.';
COMMENT ON COLUMN marts.spending_by_month_category.transactions IS 'Number of expense rows.';

CREATE TABLE marts.spending_by_month_merchant (
    month        DATE NOT NULL,
    merchant     VARCHAR NOT NULL,
    amount_cents BIGINT NOT NULL,
    transactions BIGINT NOT NULL
);
COMMENT ON TABLE marts.spending_by_month_merchant IS 'Spending per month and merchant (same rows as spending_by_month_category).';
COMMENT ON COLUMN marts.spending_by_month_merchant.merchant IS 'The service''s merchant key: the concept trimmed, lower-cased, inner whitespace collapsed to one space.';
COMMENT ON COLUMN marts.spending_by_month_merchant.amount_cents IS 'Sum of the amounts in cents; negative = money out.';

CREATE TABLE marts.cash_flow_by_month (
    month           DATE NOT NULL,
    income_cents    BIGINT NOT NULL,
    spending_cents  BIGINT NOT NULL,
    net_cents       BIGINT NOT NULL,
    transfers_cents BIGINT NOT NULL
);
COMMENT ON TABLE marts.cash_flow_by_month IS 'Money in and out per month.';
COMMENT ON COLUMN marts.cash_flow_by_month.income_cents IS 'Sum of income rows (positive = money in).';
COMMENT ON COLUMN marts.cash_flow_by_month.spending_cents IS 'Sum of expense rows (negative = money out).';
COMMENT ON COLUMN marts.cash_flow_by_month.net_cents IS 'income_cents + spending_cents (transfers excluded).';
COMMENT ON COLUMN marts.cash_flow_by_month.transfers_cents IS 'Sum of transfer rows: own-account transfers net to zero when both legs are visible.';

CREATE TABLE marts.transactions_by_month_type (
    month        DATE NOT NULL,
    type         VARCHAR NOT NULL,
    amount_cents BIGINT NOT NULL,
    transactions BIGINT NOT NULL
);
COMMENT ON TABLE marts.transactions_by_month_type IS 'Every transaction per month and type (expense, income, transfer).';

CREATE TABLE marts.balance_daily (
    account_id    UUID NOT NULL,
    account_name  VARCHAR NOT NULL,
    account_type  VARCHAR NOT NULL,
    date          DATE NOT NULL,
    balance_cents BIGINT NOT NULL
);
COMMENT ON TABLE marts.balance_daily IS 'Each account''s end-of-day balance from its first transaction to today, rolled back from the current balance through its transactions.';
COMMENT ON COLUMN marts.balance_daily.balance_cents IS 'Balance in cents; negative = owed (credit, loan).';

CREATE TABLE marts.net_worth_daily (
    date              DATE NOT NULL,
    assets_cents      BIGINT NOT NULL,
    liabilities_cents BIGINT NOT NULL,
    net_worth_cents   BIGINT NOT NULL
);
COMMENT ON TABLE marts.net_worth_daily IS 'Net worth per day from balance_daily: a positive balance counts to assets, a negative one to liabilities (as a positive magnitude).';
COMMENT ON COLUMN marts.net_worth_daily.net_worth_cents IS 'assets_cents - liabilities_cents.';

CREATE TABLE marts.net_worth_snapshots (
    refresh_id        VARCHAR NOT NULL,
    snapshot_at       TIMESTAMPTZ NOT NULL,
    currency          VARCHAR,
    assets_cents      BIGINT NOT NULL,
    liabilities_cents BIGINT NOT NULL,
    net_worth_cents   BIGINT NOT NULL,
    account_count     BIGINT NOT NULL
);
COMMENT ON TABLE marts.net_worth_snapshots IS 'Net worth as each refresh saw the accounts (history.net_worth), one row per refresh.';

-- recon: reconciliation against the service's own aggregates --------------------------------

CREATE TABLE recon.runs (
    recon_id      VARCHAR PRIMARY KEY,
    refresh_id    VARCHAR NOT NULL,         -- the refresh whose local data and aggregates were compared
    ran_at        TIMESTAMPTZ NOT NULL,
    source        VARCHAR NOT NULL,         -- refresh, offline (latest refresh's aggregates) or live (fetched now)
    verdict       VARCHAR NOT NULL,         -- agree, explained or differ
    checked       BIGINT NOT NULL,
    agree         BIGINT NOT NULL,
    explained     BIGINT NOT NULL,
    differ        BIGINT NOT NULL,
    seconds       DOUBLE
);
COMMENT ON TABLE recon.runs IS 'One row per reconciliation, with its verdict: agree (every number matches to the cent), explained (every difference has a known cause), differ.';

CREATE TABLE recon.results (
    recon_id         VARCHAR NOT NULL,
    refresh_id       VARCHAR NOT NULL,
    "check"          VARCHAR NOT NULL,      -- spending.month, spending.category, transactions.net, accounts.by_type, ...
    scope            VARCHAR NOT NULL,      -- 2024-03, all/Groceries, 2024/<category>, depository, ...
    subject          VARCHAR,               -- the compared key: category id, merchant key, month, type
    label            VARCHAR,
    from_date        DATE,
    to_date          DATE,
    local_cents      BIGINT,
    server_cents     BIGINT,
    difference_cents BIGINT,                -- local - server
    local_count      BIGINT,
    server_count     BIGINT,
    status           VARCHAR NOT NULL,      -- agree, explained, differ
    explanation      VARCHAR
);
COMMENT ON TABLE recon.results IS 'One row per comparison of a local number with the service''s own, to the cent and the count.';

CREATE TABLE recon.row_differences (
    recon_id    VARCHAR NOT NULL,
    entity      VARCHAR NOT NULL,           -- transactions or accounts
    id          UUID NOT NULL,
    kind        VARCHAR NOT NULL,           -- only_local, only_server, different
    month       DATE,
    category_id UUID,
    fields      VARCHAR,                    -- the differing fields
    "local"     JSON,
    server      JSON,
    source      VARCHAR NOT NULL            -- received (what the service sent, raw.*) or server (read now)
);
COMMENT ON TABLE recon.row_differences IS 'The rows behind a difference: only local, only on the service, or different (with both values).';
